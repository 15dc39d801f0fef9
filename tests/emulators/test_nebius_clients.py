#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A client of the Nebius emulator that is not ours: Debian's python3-grpcio with message classes
that `protoc --python_out` generates at test time from the same .proto files the driver and the
emulator are built from (plugins/nebius/proto). No Nebius SDK is packaged for Debian and
python3-grpc-tools is too old to generate stubs, so each method is called through grpc's generic
`channel.unary_unary(path, serializer, deserializer)`: the method paths and message types are the
protos', the bytes on the wire are protobuf's own.

The walk follows the reference (plugins/nebius/REFERENCE.md): a service-account JWT signed with
the `openssl` command line (RS256, kid, iss = sub) exchanged at the token exchange for a Bearer
token; platforms, the default subnet, a security group with rules, an instance with a managed
boot disk and an idempotency key, its operation polled on OperationService until done, the
instance RUNNING with a /32 public address, list / find by name, the capacity error's
ServiceError detail read from the grpc-status-details-bin trailer, delete, and nothing left.

Needs: apt-get install -y python3-grpcio python3-protobuf protobuf-compiler openssl.
The emulator binary: $GPUPROV_EMULATOR; the protos: $GPUPROV_NEBIUS_PROTO_DIR.
"""
import base64
import glob
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

from emulator_fixture import Emulator, bypass_proxy_for_loopback, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.environ.get("GPUPROV_NEBIUS_PROTO_DIR") or os.path.join(
    HERE, "..", "..", "plugins", "nebius", "proto")
PROJECT = "project-e00test"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
GEN = None  # the generated modules' directory
M = {}  # short name -> generated module


def setUpModule():
    global GEN
    bypass_proxy_for_loopback()
    GEN = tempfile.mkdtemp(prefix="nebius-py-")
    protos = sorted(os.path.relpath(p, PROTO_DIR)
                    for p in glob.glob(os.path.join(PROTO_DIR, "**", "*.proto"), recursive=True))
    subprocess.run([shutil.which("protoc") or "/usr/bin/protoc", "-I", PROTO_DIR,
                    "-I", "/usr/include", "--python_out=" + GEN] + protos, check=True)
    sys.path.insert(0, GEN)
    for short, module in {
        "status": "google.rpc.status_pb2",
        "error": "nebius.common.v1.error_pb2",
        "metadata": "nebius.common.v1.metadata_pb2",
        "operation": "nebius.common.v1.operation_pb2",
        "operation_service": "nebius.common.v1.operation_service_pb2",
        "instance": "nebius.compute.v1.instance_pb2",
        "instance_service": "nebius.compute.v1.instance_service_pb2",
        "disk": "nebius.compute.v1.disk_pb2",
        "disk_service": "nebius.compute.v1.disk_service_pb2",
        "platform_service": "nebius.compute.v1.platform_service_pb2",
        "nic": "nebius.compute.v1.network_interface_pb2",
        "subnet_service": "nebius.vpc.v1.subnet_service_pb2",
        "sg": "nebius.vpc.v1.security_group_pb2",
        "sg_service": "nebius.vpc.v1.security_group_service_pb2",
        "rule": "nebius.vpc.v1.security_rule_pb2",
        "rule_service": "nebius.vpc.v1.security_rule_service_pb2",
        "tokens": "nebius.iam.v1.token_exchange_service_pb2",
    }.items():
        M[short] = importlib.import_module(module)


def tearDownModule():
    if GEN:
        shutil.rmtree(GEN, ignore_errors=True)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signed_jwt(credentials_path, workdir, exp_in=300):
    """An RS256 JWT of the service account in the credentials file, signed by openssl."""
    with open(credentials_path) as f:
        creds = json.load(f)["subject-credentials"]
    key = os.path.join(workdir, "sa-key.pem")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(creds["private-key"])
    now = int(time.time())
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": creds["kid"]}).encode())
    claims = b64url(json.dumps({"iss": creds["iss"], "sub": creds["sub"], "iat": now,
                                "exp": now + exp_in}).encode())
    signing = (header + "." + claims).encode()
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing,
                         stdout=subprocess.PIPE, check=True).stdout
    return header + "." + claims + "." + b64url(sig), creds["iss"]


class Nebius:
    """Generic unary stubs over one plaintext channel, with the Bearer token and deadlines."""

    def __init__(self, address):
        # grpc honours http_proxy: never for loopback.
        self.channel = grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0)])
        self.token = None

    def close(self):
        self.channel.close()

    def call(self, method, request, response_type, token=True, key=None):
        rpc = self.channel.unary_unary(method, request_serializer=type(request).SerializeToString,
                                       response_deserializer=response_type.FromString)
        metadata = []
        if token and self.token:
            metadata.append(("authorization", "Bearer " + self.token))
        if key:
            metadata.append(("x-idempotency-key", key))
        return rpc(request, metadata=metadata, timeout=10)

    def wait(self, op, timeout=20):
        """Polls OperationService.Get (on the same address) until the operation has a status."""
        end = time.time() + timeout
        while not op.HasField("status") and time.time() < end:
            time.sleep(0.2)
            op = self.call("/nebius.common.v1.OperationService/Get",
                           M["operation_service"].GetOperationRequest(id=op.id),
                           M["operation"].Operation)
        return op


def service_error(rpc_error):
    """The nebius.common.v1.ServiceError in a failed call's grpc-status-details-bin trailer."""
    for key, value in rpc_error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = M["status"].Status.FromString(value)
            err = M["error"].ServiceError()
            status.details[0].Unpack(err)
            return status, err
    return None, None


class NebiusClientTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="nebius-client-")
        self.creds = os.path.join(self.workdir, "credentials.json")  # written by the emulator
        self.emu = Emulator("nebius", args=["--boot-seconds", "1"],
                            env={"NEBIUS_CREDENTIALS_FILE": self.creds,
                                 "NEBIUS_IAM_TOKEN": "client-test-ready-token"})
        self.api = Nebius(self.emu.urls["nebius"])

    def tearDown(self):
        self.api.close()
        self.emu.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def exchange(self):
        jwt, account = signed_jwt(self.creds, self.workdir)
        return self.call_exchange(jwt), account

    def call_exchange(self, jwt):
        t = M["tokens"]
        return self.api.call("/nebius.iam.v1.TokenExchangeService/Exchange",
                             t.ExchangeTokenRequest(
                                 grant_type="urn:ietf:params:oauth:grant-type:token-exchange",
                                 requested_token_type=ACCESS_TOKEN_TYPE,
                                 subject_token=jwt,
                                 subject_token_type="urn:ietf:params:oauth:token-type:jwt"),
                             t.CreateTokenResponse, token=False)

    def test_token_exchange_and_authentication(self):
        self.assertEqual(os.stat(self.creds).st_mode & 0o777, 0o600)
        ps = M["platform_service"]
        with self.assertRaises(grpc.RpcError) as no_token:
            self.api.call("/nebius.compute.v1.PlatformService/List",
                          ps.ListPlatformsRequest(parent_id=PROJECT), ps.ListPlatformsResponse)
        self.assertEqual(no_token.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        resp, _ = self.exchange()
        self.assertEqual(resp.token_type, "Bearer")
        self.assertGreater(resp.expires_in, 0)
        self.api.token = resp.access_token
        platforms = self.api.call("/nebius.compute.v1.PlatformService/List",
                                  ps.ListPlatformsRequest(parent_id=PROJECT),
                                  ps.ListPlatformsResponse)
        names = [p.metadata.name for p in platforms.items]
        self.assertIn("gpu-h100-sxm", names)
        self.assertIn("gpu-l40s-a", names)
        # A JWT that is not signed by the account's key is refused.
        jwt, _ = signed_jwt(self.creds, self.workdir)
        head, claims, _sig = jwt.split(".")
        with self.assertRaises(grpc.RpcError) as forged:
            self.call_exchange(head + "." + claims + "." + b64url(b"x" * 256))
        self.assertEqual(forged.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        # The ready token of NEBIUS_IAM_TOKEN works as it is.
        self.api.token = "client-test-ready-token"
        self.api.call("/nebius.compute.v1.PlatformService/List",
                      ps.ListPlatformsRequest(parent_id=PROJECT), ps.ListPlatformsResponse)

    def test_create_list_get_delete_instances(self):
        resp, account = self.exchange()
        self.api.token = resp.access_token
        md = M["metadata"]
        op_t = M["operation"].Operation

        subnets = self.api.call("/nebius.vpc.v1.SubnetService/List",
                                M["subnet_service"].ListSubnetsRequest(parent_id=PROJECT),
                                M["subnet_service"].ListSubnetsResponse)
        subnet = [s for s in subnets.items if s.metadata.name.startswith("default-subnet")][0]

        sg = M["sg_service"]
        op = self.api.call("/nebius.vpc.v1.SecurityGroupService/Create",
                           sg.CreateSecurityGroupRequest(
                               metadata=md.ResourceMetadata(parent_id=PROJECT, name="py-sg"),
                               spec=M["sg"].SecurityGroupSpec(
                                   network_id=subnet.spec.network_id)),
                           op_t)
        self.assertEqual(self.api.wait(op).status.code, 0)
        group = op.resource_id
        rule, rs = M["rule"], M["rule_service"]
        op = self.api.call("/nebius.vpc.v1.SecurityRuleService/Create",
                           rs.CreateSecurityRuleRequest(
                               metadata=md.ResourceMetadata(parent_id=group, name="web"),
                               spec=rule.SecurityRuleSpec(
                                   access=rule.ALLOW, protocol=rule.TCP, priority=500,
                                   type=rule.STATEFUL,
                                   ingress=rule.RuleIngress(source_cidrs=["0.0.0.0/0"],
                                                            destination_ports=[22, 80, 443,
                                                                               6443]))),
                           op_t)
        self.assertEqual(self.api.wait(op).status.code, 0)
        # A rule whose source is the group itself (RuleIngress.source_security_group_id): the
        # group's members reach each other there; a group that does not exist is NOT_FOUND.

        def peers_rule(source):
            return rs.CreateSecurityRuleRequest(
                metadata=md.ResourceMetadata(parent_id=group, name="peers"),
                spec=rule.SecurityRuleSpec(
                    access=rule.ALLOW, protocol=rule.TCP, priority=500, type=rule.STATEFUL,
                    ingress=rule.RuleIngress(source_security_group_id=source,
                                             destination_ports=[6443, 10250])))
        with self.assertRaises(grpc.RpcError) as unknown:
            self.api.call("/nebius.vpc.v1.SecurityRuleService/Create",
                          peers_rule("vpcsecuritygroup-nope"), op_t)
        self.assertEqual(unknown.exception.code(), grpc.StatusCode.NOT_FOUND)
        op = self.api.call("/nebius.vpc.v1.SecurityRuleService/Create", peers_rule(group), op_t)
        self.assertEqual(self.api.wait(op).status.code, 0)

        inst, svc, disk, nic = M["instance"], M["instance_service"], M["disk"], M["nic"]

        def request(name):
            return svc.CreateInstanceRequest(
                metadata=md.ResourceMetadata(parent_id=PROJECT, name=name,
                                             labels={"created-by": "py-client"}),
                spec=inst.InstanceSpec(
                    resources=inst.ResourcesSpec(platform="gpu-h100-sxm",
                                                 preset="1gpu-16vcpu-200gb"),
                    boot_disk=inst.AttachedDiskSpec(
                        attach_mode=inst.AttachedDiskSpec.READ_WRITE,
                        managed_disk=inst.ManagedDisk(
                            name=name + "-boot",
                            spec=disk.DiskSpec(
                                size_gibibytes=100, type=disk.DiskSpec.NETWORK_SSD,
                                source_image_family=disk.SourceImageFamily(
                                    image_family="ubuntu24.04-cuda13.0")))),
                    network_interfaces=[nic.NetworkInterfaceSpec(
                        name="eth0", subnet_id=subnet.metadata.id, ip_address=nic.IPAddress(),
                        public_ip_address=nic.PublicIPAddress(),
                        security_groups=[nic.SecurityGroup(id=group)])],
                    cloud_init_user_data="#cloud-config\nruncmd:\n  - [touch, /run/py]\n"))

        create = "/nebius.compute.v1.InstanceService/Create"
        op = self.api.call(create, request("py-vm"), op_t, key="py-key-1")
        again = self.api.call(create, request("py-vm"), op_t, key="py-key-1")
        self.assertEqual(op.id, again.id)  # the same idempotency key: the same operation
        self.assertEqual(op.created_by, account)
        self.assertTrue(op.resource_id.startswith("computeinstance-"))
        done = self.api.wait(op)
        self.assertEqual(done.status.code, 0, done.status.message)

        get = self.api.call("/nebius.compute.v1.InstanceService/Get",
                            svc.GetInstanceRequest(id=op.resource_id), inst.Instance)
        self.assertEqual(get.status.state, inst.InstanceStatus.RUNNING)
        address = get.status.network_interfaces[0].public_ip_address.address
        self.assertRegex(address, r"^127\.\d+\.\d+\.\d+/32$")
        rows = self.emu.control("GET", "/instances?cloud=nebius")["instances"]
        self.assertEqual(rows[0]["reachable_ports"], "22,80,443,6443")
        self.assertEqual(rows[0]["public_ip"] + "/32", address)
        # The private address on the subnet, where the group's members admit each other.
        private = get.status.network_interfaces[0].ip_address.address
        self.assertRegex(private, r"^10\.\d+\.\d+\.\d+/32$")
        self.assertEqual(rows[0]["private_ip"] + "/32", private)
        self.assertEqual([r for r in rows[0]["private_ingress"] if r["ports"] == "10250"],
                         [{"protocol": "tcp", "ports": "10250", "sources": [private[:-3]]}])

        second = self.api.call(create, request("py-vm-2"), op_t)
        listed = self.api.call("/nebius.compute.v1.InstanceService/List",
                               svc.ListInstancesRequest(parent_id=PROJECT, page_size=1),
                               svc.ListInstancesResponse)
        self.assertEqual([i.metadata.name for i in listed.items], ["py-vm"])
        self.assertNotEqual(listed.next_page_token, "")
        rest = self.api.call("/nebius.compute.v1.InstanceService/List",
                             svc.ListInstancesRequest(parent_id=PROJECT, page_size=1,
                                                      page_token=listed.next_page_token),
                             svc.ListInstancesResponse)
        self.assertEqual([i.metadata.name for i in rest.items], ["py-vm-2"])
        self.assertEqual(rest.next_page_token, "")
        by_name = self.api.call("/nebius.compute.v1.InstanceService/GetByName",
                                md.GetByNameRequest(parent_id=PROJECT, name="py-vm-2"),
                                inst.Instance)
        self.assertEqual(by_name.metadata.id, second.resource_id)
        self.assertEqual(by_name.metadata.labels["created-by"], "py-client")
        ds = M["disk_service"]
        disks = self.api.call("/nebius.compute.v1.DiskService/List",
                              ds.ListDisksRequest(parent_id=PROJECT), ds.ListDisksResponse)
        self.assertEqual(sorted(d.metadata.name for d in disks.items),
                         ["py-vm-2-boot", "py-vm-boot"])

        # Out of capacity: RESOURCE_EXHAUSTED with a NotEnoughResources detail.
        self.emu.control("POST", "/faults", {"cloud": "nebius", "fault": "capacity"})
        with self.assertRaises(grpc.RpcError) as cap:
            self.api.call(create, request("py-cap"), op_t)
        self.assertEqual(cap.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        status, err = service_error(cap.exception)
        self.assertEqual(status.code, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
        self.assertEqual(err.WhichOneof("details"), "not_enough_resources")
        self.assertEqual(err.not_enough_resources.violations[0].resource_type,
                         "gpu-h100-sxm/1gpu-16vcpu-200gb")

        # Delete both; DELETING, then NOT_FOUND; the group goes last.
        for instance_id in (op.resource_id, second.resource_id):
            d = self.api.call("/nebius.compute.v1.InstanceService/Delete",
                              svc.DeleteInstanceRequest(id=instance_id), op_t)
            self.assertEqual(self.api.wait(d).status.code, 0)
            with self.assertRaises(grpc.RpcError) as gone:
                self.api.call("/nebius.compute.v1.InstanceService/Get",
                              svc.GetInstanceRequest(id=instance_id), inst.Instance)
            self.assertEqual(gone.exception.code(), grpc.StatusCode.NOT_FOUND)
        d = self.api.call("/nebius.vpc.v1.SecurityGroupService/Delete",
                          sg.DeleteSecurityGroupRequest(id=group), op_t)
        self.assertEqual(self.api.wait(d).status.code, 0)
        self.assertTrue(wait_for(lambda: self.emu.counts()["backend_instances"] == 0))
        counts = self.emu.counts()
        for what in ("instances", "disks", "security_groups", "security_rules",
                     "backend_instances"):
            self.assertEqual(counts[what], 0, what)
        # The request log names gRPC methods, never the token.
        log = json.dumps(self.emu.control("GET", "/requests?cloud=nebius"))
        self.assertIn("/nebius.compute.v1.InstanceService/Create", log)
        self.assertNotIn(self.api.token, log)


if __name__ == "__main__":
    unittest.main()
