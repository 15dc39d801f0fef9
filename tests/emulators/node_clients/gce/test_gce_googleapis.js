// SPDX-License-Identifier: Apache-2.0
//
// Google's own Node client of the Compute Engine API (npm `googleapis`, pinned in
// package.json / package-lock.json) against gpuprov-emulator's Compute Engine: it creates,
// gets and deletes an instance and waits on its operations, with only its rootUrl changed
// to the emulator. Auth is google-auth-library's OAuth2Client doing a refresh_token grant
// against the emulator's token endpoint (endpoints.oauth2TokenUrl) with the user
// credentials the emulator accepts (tests/emulators/README.md, "Google Compute Engine").
// A field the client sends that the emulator refuses, or reads that the emulator does not
// return, is a bug in the emulator or in our reading of the API (issue 30, part 3).
//
// Run by run.sh (ctest emulator_gce_googleapis). The emulator binary: $GPUPROV_EMULATOR.
// Talks only to 127.0.0.1.
'use strict';

const assert = require('node:assert/strict');
const {spawn} = require('node:child_process');
const readline = require('node:readline');
const {test, before, after} = require('node:test');
const {google} = require('googleapis');

const PUBLIC_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm emu-test';
const PROJECT = 'gpuprov-emulator';  // the emulator's project without a key file
const ZONE = 'us-central1-a';

let emulator;
const urls = {};
let compute;

// Starts the emulator (memory backend, gcp only) and reads the "<cloud> <url>" lines.
function startEmulator() {
  const bin = process.env.GPUPROV_EMULATOR;
  assert.ok(bin, 'GPUPROV_EMULATOR names the gpuprov-emulator binary');
  const env = {...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost'};
  delete env.GOOGLE_APPLICATION_CREDENTIALS;
  emulator = spawn(bin, ['--backend', 'memory', '--clouds', 'gcp', '--boot-seconds', '0.5'],
                   {env, stdio: ['ignore', 'pipe', 'inherit']});
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({input: emulator.stdout});
    lines.on('line', (line) => {
      const [name, url] = line.trim().split(/\s+/);
      if (name && url) urls[name] = url;
      if (urls.control) resolve();
    });
    emulator.on('exit', (code) => reject(new Error(`gpuprov-emulator exited (${code})`)));
  });
}

before(async () => {
  await startEmulator();
  const auth = new google.auth.OAuth2({
    clientId: 'emulator-client.apps.googleusercontent.com',
    clientSecret: 'emulator-client-secret',
    endpoints: {oauth2TokenUrl: urls.gcp + '/token'},
  });
  auth.setCredentials({refresh_token: '1//emulator-refresh-token'});
  compute = google.compute({version: 'v1', auth, rootUrl: urls.gcp + '/'});
});

after(() => {
  if (emulator) emulator.kill('SIGTERM');
});

// Waits on a zone operation with zoneOperations.wait (POST .../wait returns when DONE or
// after a while), as Google's samples do.
async function waitZoneOperation(op) {
  for (let i = 0; i < 30; i++) {
    if (op.status === 'DONE') return op;
    const res = await compute.zoneOperations.wait({project: PROJECT, zone: ZONE, operation: op.name});
    op = res.data;
  }
  assert.fail(`operation ${op.name} is still ${op.status}`);
}

test('lists zones and machine types of a zone', async () => {
  const zones = await compute.zones.list({project: PROJECT});
  assert.ok(zones.data.items.some((z) => z.name === ZONE));
  const types = await compute.machineTypes.list({project: PROJECT, zone: ZONE, maxResults: 500});
  const g2 = types.data.items.find((m) => m.name === 'g2-standard-4');
  assert.ok(g2, 'g2-standard-4 is listed');
  assert.equal(g2.accelerators[0].guestAcceleratorType, 'nvidia-l4');
});

test('inserts, gets and deletes an instance, waiting on its operations', async () => {
  const requestBody = {
    name: 'node-client-vm',
    machineType: `zones/${ZONE}/machineTypes/g2-standard-4`,
    scheduling: {onHostMaintenance: 'TERMINATE', automaticRestart: true},
    disks: [{
      boot: true,
      autoDelete: true,
      initializeParams: {
        sourceImage: 'projects/deeplearning-platform-release/global/images/family/' +
                     'common-cu128-ubuntu-2204-nvidia-570',
        diskSizeGb: '100',
        diskType: `zones/${ZONE}/diskTypes/pd-balanced`,
      },
    }],
    networkInterfaces: [{
      network: 'global/networks/default',
      accessConfigs: [{type: 'ONE_TO_ONE_NAT', name: 'External NAT'}],
    }],
    metadata: {items: [{key: 'ssh-keys', value: `ubuntu:${PUBLIC_KEY}`},
                       {key: 'enable-oslogin', value: 'FALSE'}]},
    labels: {gpuprov: '1', 'gpuprov-name': 'node-client-vm'},
    tags: {items: ['gpuprov-node-client-vm']},
  };
  const insert = await compute.instances.insert({
    project: PROJECT, zone: ZONE, requestId: '6f1c7a52-3a61-4d0e-9a8f-0b7d5c2e9a11', requestBody});
  assert.equal(insert.status, 200);
  assert.equal(insert.data.kind, 'compute#operation');
  assert.equal(insert.data.operationType, 'insert');
  const done = await waitZoneOperation(insert.data);
  assert.equal(done.status, 'DONE');
  assert.equal(done.error, undefined, JSON.stringify(done.error));

  // zoneOperations.get reads the same finished operation.
  const again = await compute.zoneOperations.get({project: PROJECT, zone: ZONE, operation: done.name});
  assert.equal(again.data.status, 'DONE');
  assert.ok(again.data.targetLink.endsWith(`/zones/${ZONE}/instances/node-client-vm`));

  const got = await compute.instances.get({project: PROJECT, zone: ZONE, instance: 'node-client-vm'});
  const inst = got.data;
  assert.equal(inst.name, 'node-client-vm');
  assert.equal(inst.status, 'RUNNING');
  const base = `https://www.googleapis.com/compute/v1/projects/${PROJECT}`;
  assert.equal(inst.zone, `${base}/zones/${ZONE}`);
  assert.equal(inst.machineType, `${base}/zones/${ZONE}/machineTypes/g2-standard-4`);
  assert.equal(inst.guestAccelerators[0].acceleratorType,
               `${base}/zones/${ZONE}/acceleratorTypes/nvidia-l4`);
  assert.equal(inst.guestAccelerators[0].acceleratorCount, 1);
  assert.deepEqual(
      {...inst.scheduling},
      {onHostMaintenance: 'TERMINATE', automaticRestart: true, preemptible: false,
       provisioningModel: 'STANDARD'});
  assert.match(inst.networkInterfaces[0].accessConfigs[0].natIP, /^127\./);
  assert.equal(inst.labels['gpuprov-name'], 'node-client-vm');
  assert.equal(inst.resourceStatus.effectiveInstanceMetadata.enableOsloginMetadataValue, false);

  const agg = await compute.instances.aggregatedList(
      {project: PROJECT, filter: 'labels.gpuprov = "1"', returnPartialSuccess: true});
  assert.equal(agg.data.items[`zones/${ZONE}`].instances.length, 1);

  const del = await compute.instances.delete({project: PROJECT, zone: ZONE, instance: 'node-client-vm'});
  assert.equal(del.data.operationType, 'delete');
  await waitZoneOperation(del.data);
  await assert.rejects(
      compute.instances.get({project: PROJECT, zone: ZONE, instance: 'node-client-vm'}),
      (err) => err.status === 404 || err.code === 404);
});

test('an insert the API refuses reaches the client as a Google error', async () => {
  await assert.rejects(
      compute.instances.insert({project: PROJECT, zone: ZONE, requestBody: {
        name: 'bad-vm', machineType: `zones/${ZONE}/machineTypes/no-such-type`}}),
      (err) => {
        assert.equal(err.status, 400);
        assert.match(err.message, /machineType/);
        // Google's error envelope, as the client hands it on.
        const body = err.response.data.error;
        assert.equal(body.code, 400);
        assert.equal(body.errors[0].reason, 'invalid');
        return true;
      });
});
