// SPDX-License-Identifier: Apache-2.0
//
// A DigitalOcean client nobody here wrote, run against gpuprov-emulator: the `dots-wrapper`
// npm package (pjpimentel/dots, pinned in package.json here and its lock file)
// with only its endpoint changed. It registers an SSH key, creates a GPU droplet as gpuprov
// would (size, image, tags, user data, ipv6), waits for its create action and `active`, makes
// a firewall for it, adds a rule, replaces it, lists by tag, and deletes the firewall, the
// droplet and the key. Every object the emulator answers must carry each field dots-wrapper's
// own TypeScript interfaces declare as always present (node_modules/dots-wrapper/dist/*/types):
// a field the client reads that the emulator does not return is a bug in the emulator.
//
// Needs node and `npm ci` in this folder (scripts/setup.sh does it).
// The emulator binary: $GPUPROV_EMULATOR, else <repo>/build-emu/bin/gpuprov-emulator.
// Talks only to 127.0.0.1.
'use strict';

const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const readline = require('node:readline');

const HERE = __dirname;
const CLIENTS = path.join(HERE, 'node_modules');
const TOKEN = 'dop_v1_dots_wrapper_test_token';
const PUBLIC_KEY =
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJUeW8OWN9ub68dw8qD7cVkpP5fX+R7F0nbhoeOp4EjF dots@gpuprov';

// Loopback only: no proxy may carry this traffic (axios honours the *_PROXY variables).
for (const v of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'ALL_PROXY', 'all_proxy']) {
  delete process.env[v];
}

// scripts/setup.sh installs the pinned client (npm ci here); without it this test fails, naming
// the fix, rather than passing without having run.
let dots;
try {
  dots = require(path.join(CLIENTS, 'dots-wrapper'));
} catch (e) {
  console.error('dots-wrapper is not installed: run scripts/setup.sh ' +
                '(or npm ci --prefix tests/emulators/node_clients/digitalocean)');
  throw e;
}

// The fields an interface of dots-wrapper declares without `?`: what the client reads.
function requiredFields(typesFile, iface) {
  const text = fs.readFileSync(path.join(CLIENTS, 'dots-wrapper', 'dist', typesFile), 'utf8');
  const body = text.match(new RegExp(`interface ${iface}[^{]*\\{([^}]*)\\}`));
  assert.ok(body, `no interface ${iface} in ${typesFile}`);
  const out = [];
  for (const line of body[1].split('\n')) {
    const m = line.match(/^\s*([a-z_0-9]+)\s*:/);
    if (m) out.push(m[1]);
  }
  assert.ok(out.length > 0, `no fields read from ${iface}`);
  return out;
}

function expectFields(obj, typesFile, iface, what) {
  for (const f of requiredFields(typesFile, iface)) {
    assert.ok(obj !== null && typeof obj === 'object' && f in obj,
      `${what}: the emulator's answer lacks ${f}, which dots-wrapper's ${iface} declares: ` +
      JSON.stringify(obj));
  }
}

function control(base, method, p, body) {
  return new Promise((resolve, reject) => {
    const u = new URL(base + p);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method },
      (res) => {
        let data = '';
        res.on('data', (c) => { data += c; });
        res.on('end', () => resolve(data ? JSON.parse(data) : null));
      });
    req.on('error', reject);
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}

function startEmulator() {
  const bin = process.env.GPUPROV_EMULATOR ||
    path.join(HERE, '..', '..', 'build-emu', 'bin', 'gpuprov-emulator');
  const proc = spawn(bin, ['--backend', 'memory', '--clouds', 'digitalocean', '--boot-seconds', '1',
    '--no-rate-limits'], { env: { ...process.env, DIGITALOCEAN_TOKEN: TOKEN },
    stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const urls = {};
    const lines = readline.createInterface({ input: proc.stdout });
    lines.on('line', (line) => {
      const [name, url] = line.trim().split(/\s+/);
      urls[name] = url;
      if (name === 'control') resolve({ proc, urls });
    });
    proc.on('exit', (code) => reject(new Error(`gpuprov-emulator exited (${code}) before its endpoints`)));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function statusOf(promise) {
  try {
    return (await promise).status;
  } catch (e) {
    if (e.response) return e.response.status;
    throw e;
  }
}

async function main() {
  const { proc, urls } = await startEmulator();
  try {
    const client = dots.createApiClient({ token: TOKEN, endpoint: urls.digitalocean });

    const { data: { account } } = await client.account.getAccount();
    expectFields(account, 'account/types/account.d.ts', 'IAccount', 'GET /account');

    const { data: { sizes } } = await client.size.listSizes({ per_page: 200 });
    const h100 = sizes.find((s) => s.slug === 'gpu-h100x1-80gb');
    assert.ok(h100, 'the sizes list has gpu-h100x1-80gb');
    expectFields(h100, 'size/types/size.d.ts', 'ISize', 'GET /sizes');
    const { data: { regions } } = await client.region.listRegions({ per_page: 200 });
    const region = regions.find((r) => r.available && r.sizes.includes(h100.slug) &&
      h100.regions.includes(r.slug));
    assert.ok(region, 'a region sells gpu-h100x1-80gb');
    expectFields(region, 'region/types/region.d.ts', 'IRegion', 'GET /regions');

    const { data: { ssh_key: key } } =
      await client.sshKey.createSshKey({ name: 'dots-test', public_key: PUBLIC_KEY });
    expectFields(key, 'ssh-key/types/ssh-key.d.ts', 'ISshKey', 'POST /account/keys');

    const created = await client.droplet.createDroplet({
      name: 'dots-gpu',
      region: region.slug,
      size: h100.slug,
      image: 'gpu-h100x1-base',
      ssh_keys: [key.id],
      tags: ['gpuprov', 'gpuprov-vm:dots-gpu'],
      user_data: '#!/bin/bash\necho hi\n',
      ipv6: true,
      monitoring: false,
      backups: false,
    });
    assert.equal(created.status, 202);
    const droplet = created.data.droplet;
    expectFields(droplet, 'droplet/types/droplet.d.ts', 'IDroplet', 'POST /droplets');
    assert.equal(droplet.name, 'dots-gpu');
    assert.equal(droplet.status, 'new');

    const actionId = created.data.links.actions[0].id;
    const action = await waitFor('the create action', async () => {
      const { data } = await client.action.getAction({ action_id: actionId });
      return data.action.status === 'completed' ? data.action : null;
    });
    expectFields(action, 'action/types/action.d.ts', 'IAction', 'GET /actions/{id}');
    const active = await waitFor('the droplet active with a public address', async () => {
      const { data } = await client.droplet.getDroplet({ droplet_id: droplet.id });
      const d = data.droplet;
      return d.status === 'active' && d.networks.v4.some((n) => n.type === 'public') ? d : null;
    });
    expectFields(active, 'droplet/types/droplet.d.ts', 'IDroplet', 'GET /droplets/{id}');
    expectFields(active.size, 'size/types/size.d.ts', 'ISize', 'droplet.size');
    expectFields(active.region, 'region/types/region.d.ts', 'IRegion', 'droplet.region');

    // A GPU droplet is listed by its tag (the plain list hides GPU droplets).
    const { data: tagged } = await client.droplet.listDroplets({ tag_name: 'gpuprov' });
    assert.deepEqual(tagged.droplets.map((d) => d.name), ['dots-gpu']);

    const everyone = { addresses: ['0.0.0.0/0', '::/0'] };
    const fwCreated = await client.firewall.createFirewall({
      name: 'gpuprov-dots-gpu',
      inbound_rules: [{ protocol: 'tcp', ports: '22', sources: everyone }],
      outbound_rules: [
        { protocol: 'tcp', ports: '0', destinations: everyone },
        { protocol: 'udp', ports: '0', destinations: everyone },
        { protocol: 'icmp', destinations: everyone },
      ],
      droplet_ids: [droplet.id],
      tags: [],
    });
    assert.equal(fwCreated.status, 202);
    const fw = fwCreated.data.firewall;
    expectFields(fw, 'firewall/types/firewall.d.ts', 'IFirewall', 'POST /firewalls');
    assert.deepEqual(fw.droplet_ids, [droplet.id]);

    await client.firewall.addRulesToFirewall({
      firewall_id: fw.id,
      inbound_rules: [{ protocol: 'tcp', ports: '6443', sources: everyone }],
    });
    const { data: { firewall: got } } = await client.firewall.getFirewall({ firewall_id: fw.id });
    assert.deepEqual(got.inbound_rules.map((r) => r.ports), ['22', '6443']);

    // PUT replaces the whole firewall (what updateFirewall sends: droplet_ids, inbound_rules,
    // name, outbound_rules, tags).
    const { data: { firewall: replaced } } = await client.firewall.updateFirewall({
      ...got,
      inbound_rules: [...got.inbound_rules, { protocol: 'tcp', ports: '443', sources: everyone }],
    });
    assert.deepEqual(replaced.inbound_rules.map((r) => r.ports), ['22', '6443', '443']);
    const { data: { firewalls } } = await client.firewall.listFirewalls({});
    assert.deepEqual(firewalls.map((f) => f.name), ['gpuprov-dots-gpu']);

    assert.equal(await statusOf(client.firewall.deleteFirewall({ firewall_id: fw.id })), 204);
    assert.equal(await statusOf(client.droplet.deleteDroplet({ droplet_id: droplet.id })), 204);
    assert.equal(await statusOf(client.droplet.getDroplet({ droplet_id: droplet.id })), 404);
    assert.equal(await statusOf(client.firewall.getFirewall({ firewall_id: fw.id })), 404);
    assert.equal(await statusOf(client.sshKey.destroySshKey({ ssh_key_id: key.id })), 204);

    const counts = await control(urls.control, 'GET', '/counts?cloud=digitalocean');
    assert.equal(counts.instances, 0);
    assert.equal(counts.firewalls, 0);
    assert.equal(counts.ssh_keys, 0);
    console.log('ok: dots-wrapper created and deleted a droplet, a firewall and a key');
  } finally {
    proc.kill('SIGTERM');
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
