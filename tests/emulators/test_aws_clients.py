#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real EC2 clients against gpuprov-emulator: Debian's AWS CLI (/usr/bin/aws, botocore's SigV4
signer, POST form bodies) and python3-libcloud's EC2 driver (SigV4 over GET with the parameters
in the query) create, list and destroy instances with only the endpoint changed; the emulator
verifies every signature. Run with /usr/bin/python3 (Debian's packages load only there);
stdlib unittest only.

The emulator binary: $GPUPROV_EMULATOR, else <repo>/build-aws/bin/gpuprov-emulator.
"""
import base64
import hashlib
import json
import os
import subprocess
import unittest

from emulator_fixture import Emulator, bypass_proxy_for_loopback, wait_for

KEY_ID = "AKIACLIENTTEST000001"
SECRET = "client/test+Secret/0123456789abcdefABCDEF"
REGION = "eu-west-1"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm "
              "emu-test")
DLAMI = ("resolve:ssm:/aws/service/deeplearning/ami/x86_64/"
         "base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
UBUNTU = ("resolve:ssm:/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/"
          "ebs-gp2/ami-id")
AWS_CLI = "/usr/bin/aws"


def setUpModule():
    global EMU
    bypass_proxy_for_loopback()
    EMU = Emulator("aws", ["--boot-seconds", "0.5"],
                   {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET},
                   build_dir="build-aws")


def tearDownModule():
    EMU.stop()


class AwsCli(unittest.TestCase):
    """The AWS CLI v2 with --endpoint-url: botocore signs, the emulator verifies."""

    def setUp(self):
        if not os.access(AWS_CLI, os.X_OK):
            self.skipTest("apt-get install -y awscli")
        EMU.control("POST", "/reset", {})
        self.home = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpuprov-awscli-%d" % os.getpid())
        os.makedirs(self.home, exist_ok=True)

    def aws(self, *args, secret=SECRET, check=True):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.home, "AWS_ACCESS_KEY_ID": KEY_ID,
               "AWS_SECRET_ACCESS_KEY": secret, "AWS_DEFAULT_REGION": REGION,
               "AWS_PAGER": "", "AWS_EC2_METADATA_DISABLED": "true",
               "NO_PROXY": "127.0.0.1,localhost"}
        p = subprocess.run([AWS_CLI, "--endpoint-url", EMU.urls["aws"], "--output", "json",
                            "ec2"] + list(args), env=env, capture_output=True, text=True,
                           timeout=60)
        if check and p.returncode != 0:
            self.fail("aws ec2 %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def test_run_describe_terminate(self):
        run = json.loads(self.aws(
            "run-instances", "--image-id", DLAMI, "--instance-type", "g6.xlarge", "--count", "1",
            "--client-token", "cli-token-1",
            "--user-data", "#!/bin/bash\necho hello\n",
            "--tag-specifications",
            "ResourceType=instance,Tags=[{Key=Name,Value=cli-vm},{Key=gpuprov,Value=1}]").stdout)
        inst = run["Instances"][0]
        iid = inst["InstanceId"]
        self.assertRegex(iid, r"^i-[0-9a-f]{17}$")
        self.assertEqual(inst["State"], {"Code": 0, "Name": "pending"})
        self.assertEqual(inst["InstanceType"], "g6.xlarge")
        self.assertRegex(inst["ImageId"], r"^ami-[0-9a-f]{17}$")
        self.assertEqual(inst["Placement"]["AvailabilityZone"], REGION + "a")
        self.assertNotIn("PublicIpAddress", inst)
        # The same client token gives the same reservation, not a second instance.
        again = json.loads(self.aws(
            "run-instances", "--image-id", DLAMI, "--instance-type", "g6.xlarge", "--count", "1",
            "--client-token", "cli-token-1",
            "--user-data", "#!/bin/bash\necho hello\n",
            "--tag-specifications",
            "ResourceType=instance,Tags=[{Key=Name,Value=cli-vm},{Key=gpuprov,Value=1}]").stdout)
        self.assertEqual(again["Instances"][0]["InstanceId"], iid)
        self.assertEqual(EMU.counts()["instances"], 1)

        def describe(*extra):
            out = json.loads(self.aws("describe-instances", *extra).stdout)
            return [i for r in out["Reservations"] for i in r["Instances"]]

        self.assertTrue(wait_for(lambda: describe("--instance-ids", iid)[0]["State"]["Name"] == "running"))
        running = describe("--instance-ids", iid)[0]
        self.assertTrue(running["PublicIpAddress"].startswith("127.91."))
        self.assertEqual({t["Key"]: t["Value"] for t in running["Tags"]}["Name"], "cli-vm")
        # Find by name as gpuprov does (plugins/aws/REFERENCE.md §3.3).
        found = describe("--filters", "Name=tag:Name,Values=cli-vm",
                         "Name=instance-state-name,Values=pending,running")
        self.assertEqual([i["InstanceId"] for i in found], [iid])
        self.assertEqual(describe("--filters", "Name=tag:Name,Values=other"), [])

        term = json.loads(self.aws("terminate-instances", "--instance-ids", iid).stdout)
        change = term["TerminatingInstances"][0]
        self.assertEqual(change["PreviousState"]["Name"], "running")
        self.assertEqual(change["CurrentState"], {"Code": 32, "Name": "shutting-down"})
        self.assertTrue(wait_for(lambda: describe("--instance-ids", iid)[0]["State"]["Name"] == "terminated"))
        self.assertEqual(EMU.counts()["instances"], 0)
        self.assertEqual(EMU.counts()["backend_instances"], 0)

    def test_errors_come_back_with_their_codes(self):
        p = self.aws("describe-instances", secret="not-the-secret", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("AuthFailure", p.stderr)
        p = self.aws("describe-instances", "--instance-ids", "i-0123456789abcdef0", check=False)
        self.assertIn("InvalidInstanceID.NotFound", p.stderr)
        big = "x" * 16385
        p = self.aws("run-instances", "--image-id", UBUNTU, "--instance-type", "t3.micro",
                     "--user-data", big, check=False)
        self.assertIn("InvalidParameterValue", p.stderr)
        self.assertIn("16384", p.stderr)
        # botocore retries a 500 itself, so the fault stays armed for every attempt.
        EMU.control("POST", "/faults", {"cloud": "aws", "fault": "capacity", "times": -1})
        p = self.aws("run-instances", "--image-id", UBUNTU, "--instance-type", "t3.micro",
                     check=False)
        EMU.control("DELETE", "/faults?cloud=aws")
        self.assertIn("InsufficientInstanceCapacity", p.stderr)
        self.assertEqual(EMU.counts()["instances"], 0)

    def test_security_group_and_key_pair(self):
        path = os.path.join(self.home, "key.pub")
        with open(path, "w") as f:
            f.write(PUBLIC_KEY + "\n")
        key = json.loads(self.aws("import-key-pair", "--key-name", "gpuprov-cli",
                                  "--public-key-material", "fileb://" + path).stdout)
        blob = base64.b64decode(PUBLIC_KEY.split()[1])
        self.assertEqual(key["KeyFingerprint"], base64.b64encode(hashlib.sha256(blob).digest()).decode())
        dup = self.aws("import-key-pair", "--key-name", "gpuprov-cli",
                       "--public-key-material", "fileb://" + path, check=False)
        self.assertIn("InvalidKeyPair.Duplicate", dup.stderr)
        sg = json.loads(self.aws("create-security-group", "--group-name", "gpuprov-cli",
                                 "--description", "test").stdout)["GroupId"]
        for port in ("22", "6443"):
            self.aws("authorize-security-group-ingress", "--group-id", sg, "--protocol", "tcp",
                     "--port", port, "--cidr", "0.0.0.0/0")
        dup = self.aws("authorize-security-group-ingress", "--group-id", sg, "--protocol", "tcp",
                       "--port", "22", "--cidr", "0.0.0.0/0", check=False)
        self.assertIn("InvalidPermission.Duplicate", dup.stderr)
        groups = json.loads(self.aws("describe-security-groups", "--group-ids", sg).stdout)
        ports = sorted(p["FromPort"] for p in groups["SecurityGroups"][0]["IpPermissions"])
        self.assertEqual(ports, [22, 6443])
        run = json.loads(self.aws("run-instances", "--image-id", UBUNTU, "--instance-type",
                                  "t3.micro", "--key-name", "gpuprov-cli",
                                  "--security-group-ids", sg).stdout)
        iid = run["Instances"][0]["InstanceId"]
        busy = self.aws("delete-security-group", "--group-id", sg, check=False)
        self.assertIn("DependencyViolation", busy.stderr)
        self.aws("terminate-instances", "--instance-ids", iid)
        self.assertTrue(wait_for(lambda: self.aws("delete-security-group", "--group-id", sg,
                                                  check=False).returncode == 0))
        self.aws("delete-key-pair", "--key-name", "gpuprov-cli")
        counts = EMU.counts()
        self.assertEqual((counts["firewalls"], counts["ssh_keys"]), (0, 0))


    def test_a_self_referencing_group_and_private_addresses(self):
        # Issue 33: a cluster's group admits its own members on the peer ports
        # (--source-group, a UserIdGroupPair); instances report PrivateIpAddress and VpcId.
        sg = json.loads(self.aws("create-security-group", "--group-name", "gpuprov-cli-peers",
                                 "--description", "cluster").stdout)["GroupId"]
        for proto, port in (("tcp", "6443"), ("tcp", "10250"), ("udp", "51820")):
            self.aws("authorize-security-group-ingress", "--group-id", sg, "--protocol", proto,
                     "--port", port, "--source-group", sg)
        dup = self.aws("authorize-security-group-ingress", "--group-id", sg, "--protocol", "tcp",
                       "--port", "6443", "--source-group", sg, check=False)
        self.assertIn("InvalidPermission.Duplicate", dup.stderr)
        missing = self.aws("authorize-security-group-ingress", "--group-id", sg, "--protocol",
                           "tcp", "--port", "22", "--source-group", "sg-0000000000000000f",
                           check=False)
        self.assertIn("InvalidGroup.NotFound", missing.stderr)
        perms = json.loads(self.aws("describe-security-groups", "--group-ids", sg).stdout)[
            "SecurityGroups"][0]["IpPermissions"]
        self.assertEqual(sorted((p["IpProtocol"], p["FromPort"]) for p in perms),
                         [("tcp", 6443), ("tcp", 10250), ("udp", 51820)])
        for p in perms:
            self.assertEqual([g["GroupId"] for g in p["UserIdGroupPairs"]], [sg])
            self.assertEqual(p["IpRanges"], [])
        run = json.loads(self.aws("run-instances", "--image-id", UBUNTU, "--instance-type",
                                  "t3.micro", "--count", "2", "--security-group-ids",
                                  sg).stdout)
        ids = [i["InstanceId"] for i in run["Instances"]]
        described = json.loads(self.aws("describe-instances", "--instance-ids", *ids).stdout)
        instances = [i for r in described["Reservations"] for i in r["Instances"]]
        addresses = {i["PrivateIpAddress"] for i in instances}
        self.assertEqual(len(addresses), 2, instances)
        self.assertTrue(all(i["VpcId"] and i["SubnetId"] for i in instances), instances)
        self.aws("revoke-security-group-ingress", "--group-id", sg, "--protocol", "tcp",
                 "--port", "10250", "--source-group", sg)
        perms = json.loads(self.aws("describe-security-groups", "--group-ids", sg).stdout)[
            "SecurityGroups"][0]["IpPermissions"]
        self.assertEqual(len(perms), 2)
        self.aws("terminate-instances", "--instance-ids", *ids)
        self.assertTrue(wait_for(lambda: self.aws("delete-security-group", "--group-id", sg,
                                                  check=False).returncode == 0))

    def test_ecdsa_key_is_refused(self):
        # EC2 API reference, ImportKeyPair: RSA and ED25519 only.
        subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-C", "cli",
                        "-f", os.path.join(self.home, "ecdsa")], check=True,
                       input="y\n", text=True, capture_output=True)
        p = self.aws("import-key-pair", "--key-name", "ecdsa-cli", "--public-key-material",
                     "fileb://" + os.path.join(self.home, "ecdsa.pub"), check=False)
        self.assertIn("InvalidKey.Format", p.stderr)
        self.assertEqual(EMU.counts()["ssh_keys"], 0)

    def test_no_default_vpc_then_a_subnet_with_network_interfaces(self):
        """botocore's own serialization of --network-interfaces (NetworkInterface.1.*, its
        Groups as SecurityGroupId.N) is what the emulator parses; without a default VPC a
        launch without a subnet is VPCIdNotSpecified."""
        vpcs = json.loads(self.aws("describe-vpcs", "--filters", "Name=isDefault,Values=true").stdout)
        self.assertEqual(len(vpcs["Vpcs"]), 1)
        EMU.control("POST", "/settings", {"cloud": "aws", "default_vpc": False})
        vpcs = json.loads(self.aws("describe-vpcs", "--filters", "Name=isDefault,Values=true").stdout)
        self.assertEqual(vpcs["Vpcs"], [])
        p = self.aws("run-instances", "--image-id", UBUNTU, "--instance-type", "t3.micro",
                     check=False)
        self.assertIn("VPCIdNotSpecified", p.stderr)
        p = self.aws("create-security-group", "--group-name", "x", "--description", "x",
                     check=False)
        self.assertIn("VPCIdNotSpecified", p.stderr)
        subnet = json.loads(self.aws("describe-subnets").stdout)["Subnets"][0]
        self.assertFalse(subnet["MapPublicIpOnLaunch"])
        sg = json.loads(self.aws("create-security-group", "--group-name", "net-cli",
                                 "--description", "x", "--vpc-id", subnet["VpcId"]).stdout)["GroupId"]
        run = json.loads(self.aws(
            "run-instances", "--image-id", UBUNTU, "--instance-type", "t3.micro",
            "--network-interfaces",
            json.dumps([{"DeviceIndex": 0, "SubnetId": subnet["SubnetId"],
                         "AssociatePublicIpAddress": True, "DeleteOnTermination": True,
                         "Groups": [sg]}])).stdout)
        inst = run["Instances"][0]
        self.assertEqual(inst["SubnetId"], subnet["SubnetId"])
        self.assertEqual(inst["VpcId"], subnet["VpcId"])
        self.assertEqual(inst["SecurityGroups"][0]["GroupId"], sg)

        def described():
            out = json.loads(self.aws("describe-instances", "--instance-ids", inst["InstanceId"]).stdout)
            return out["Reservations"][0]["Instances"][0]

        self.assertTrue(wait_for(lambda: described()["State"]["Name"] == "running"))
        self.assertTrue(described()["PublicIpAddress"].startswith("127.91."))
        self.aws("terminate-instances", "--instance-ids", inst["InstanceId"])


class AwsCliCredentialServices(unittest.TestCase):
    """The AWS CLI v2 (botocore) against the emulator's STS, SSO portal, container credentials
    and IMDSv2: what it gets back signs EC2 calls the emulator accepts."""

    def setUp(self):
        if not os.access(AWS_CLI, os.X_OK):
            self.skipTest("apt-get install -y awscli")
        EMU.control("POST", "/reset", {})
        self.home = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gpuprov-awscred-%d" % os.getpid())
        os.makedirs(self.home, exist_ok=True)

    def cli(self, args, keys=(KEY_ID, SECRET, None), extra_env=None, check=True):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.home, "AWS_DEFAULT_REGION": REGION,
               "AWS_PAGER": "", "AWS_EC2_METADATA_DISABLED": "true",
               "NO_PROXY": "127.0.0.1,localhost"}
        if keys:
            env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = keys[0], keys[1]
            if keys[2]:
                env["AWS_SESSION_TOKEN"] = keys[2]
        env.update(extra_env or {})
        p = subprocess.run([AWS_CLI, "--endpoint-url", EMU.urls["aws"], "--output", "json"] +
                           list(args), env=env, capture_output=True, text=True, timeout=60)
        if check and p.returncode != 0:
            self.fail("aws %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def ec2_works(self, keys=None, extra_env=None):
        p = self.cli(["ec2", "describe-regions"], keys=keys, extra_env=extra_env, check=False)
        return p.returncode == 0, p.stderr

    def test_assume_role_signed_with_sts_scope(self):
        out = json.loads(self.cli(["sts", "assume-role", "--role-arn",
                                   "arn:aws:iam::123456789012:role/gpuprov-dev",
                                   "--role-session-name", "cli-session"]).stdout)
        c = out["Credentials"]
        self.assertRegex(c["AccessKeyId"], r"^ASIA[0-9A-F]{16}$")
        self.assertEqual(out["AssumedRoleUser"]["Arn"],
                         "arn:aws:sts::123456789012:assumed-role/gpuprov-dev/cli-session")
        temp = (c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
        ok, err = self.ec2_works(temp)
        self.assertTrue(ok, err)
        ok, err = self.ec2_works((temp[0], temp[1], None))
        self.assertFalse(ok)
        self.assertIn("AuthFailure", err)
        ident = json.loads(self.cli(["sts", "get-caller-identity"], keys=temp).stdout)
        self.assertEqual(ident["Arn"], out["AssumedRoleUser"]["Arn"])
        denied = self.cli(["sts", "assume-role", "--role-arn",
                           "arn:aws:iam::123456789012:role/denied-x", "--role-session-name", "s1"],
                          check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("AccessDenied", denied.stderr)
        wrong = self.cli(["sts", "assume-role", "--role-arn",
                          "arn:aws:iam::123456789012:role/r", "--role-session-name", "s1"],
                         keys=(KEY_ID, "wrong-secret", None), check=False)
        self.assertIn("SignatureDoesNotMatch", wrong.stderr)
        self.assertEqual(EMU.counts()["credentials_issued"], 1)

    def test_assume_role_with_web_identity_is_unsigned(self):
        out = json.loads(self.cli(["sts", "assume-role-with-web-identity", "--role-arn",
                                   "arn:aws:iam::123456789012:role/ci", "--role-session-name",
                                   "ci", "--web-identity-token", "aGVhZA.Ym9keQ.c2ln"],
                                  keys=None).stdout)
        c = out["Credentials"]
        ok, err = self.ec2_works((c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]))
        self.assertTrue(ok, err)
        bad = self.cli(["sts", "assume-role-with-web-identity", "--role-arn",
                        "arn:aws:iam::123456789012:role/ci", "--role-session-name", "ci",
                        "--web-identity-token", "not-a-jwt"], keys=None, check=False)
        self.assertIn("InvalidIdentityToken", bad.stderr)

    def test_sso_portal_role_credentials(self):
        out = json.loads(self.cli(["sso", "get-role-credentials", "--access-token",
                                   "emulator-aws-sso-token", "--account-id", "111122223333",
                                   "--role-name", "Dev", "--region", "us-east-1"],
                                  keys=None).stdout)
        rc = out["roleCredentials"]
        self.assertGreater(rc["expiration"], 1_000_000_000_000)  # milliseconds
        ok, err = self.ec2_works((rc["accessKeyId"], rc["secretAccessKey"], rc["sessionToken"]))
        self.assertTrue(ok, err)
        bad = self.cli(["sso", "get-role-credentials", "--access-token", "stale",
                        "--account-id", "111122223333", "--role-name", "Dev",
                        "--region", "us-east-1"], keys=None, check=False)
        self.assertIn("UnauthorizedException", bad.stderr)

    def test_container_credentials_and_imds_feed_botocore(self):
        url = EMU.urls["aws"]
        ok, err = self.ec2_works(None, {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": url + "/container-credentials/pod",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "emulator-aws-container-token"})
        self.assertTrue(ok, err)
        ok, err = self.ec2_works(None, {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": url + "/container-credentials/pod",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "wrong"})
        self.assertFalse(ok)
        ok, err = self.ec2_works(None, {"AWS_EC2_METADATA_DISABLED": "false",
                                        "AWS_EC2_METADATA_SERVICE_ENDPOINT": url + "/"})
        self.assertTrue(ok, err)


class Libcloud(unittest.TestCase):
    """python3-libcloud's EC2 driver (SigV4 requested; its default is the query-string SigV2,
    which the emulator does not accept)."""

    def setUp(self):
        try:
            from libcloud.compute.providers import get_driver
            from libcloud.compute.types import Provider
        except ImportError:
            self.skipTest("apt-get install -y python3-libcloud")
        EMU.control("POST", "/reset", {})
        port = int(EMU.urls["aws"].rsplit(":", 1)[1])
        cls = get_driver(Provider.EC2)
        self.driver = cls(KEY_ID, SECRET, region=REGION, host="127.0.0.1", port=port,
                          secure=False, signature_version="4")

    def test_list_create_destroy(self):
        from libcloud.compute.base import NodeImage, NodeSize
        from libcloud.compute.types import NodeState
        d = self.driver
        self.assertEqual(d.list_nodes(), [])
        # libcloud's built-in size table is old; a size is only its id on the wire.
        size = NodeSize(id="g6.xlarge", name="g6.xlarge", ram=16384, disk=0, bandwidth=None,
                        price=None, driver=d)
        image = NodeImage(id=DLAMI, name="dlami", driver=d)
        node = d.create_node(name="lc-vm", size=size, image=image,
                             ex_userdata="#!/bin/bash\necho hi\n",
                             ex_metadata={"gpuprov": "1"})
        self.assertEqual(node.state, NodeState.PENDING)
        self.assertEqual(node.name, "lc-vm")
        self.assertTrue(wait_for(lambda: d.list_nodes()[0].state == NodeState.RUNNING))
        listed = d.list_nodes()[0]
        self.assertEqual(listed.id, node.id)
        self.assertEqual(listed.name, "lc-vm")
        self.assertEqual(listed.extra["tags"]["gpuprov"], "1")
        self.assertTrue(listed.public_ips[0].startswith("127.91."))
        self.assertEqual(listed.extra["instance_type"], "g6.xlarge")
        self.assertEqual(EMU.counts()["instances"], 1)
        self.assertTrue(d.destroy_node(listed))
        self.assertTrue(wait_for(lambda: d.list_nodes()[0].state == NodeState.TERMINATED))
        self.assertEqual(EMU.counts()["instances"], 0)
        self.assertEqual(EMU.counts()["backend_instances"], 0)

    def test_wrong_secret_is_refused(self):
        from libcloud.compute.providers import get_driver
        from libcloud.compute.types import Provider
        port = int(EMU.urls["aws"].rsplit(":", 1)[1])
        bad = get_driver(Provider.EC2)(KEY_ID, "wrong", region=REGION, host="127.0.0.1",
                                       port=port, secure=False, signature_version="4")
        with self.assertRaises(Exception) as ctx:
            bad.list_nodes()
        self.assertIn("AuthFailure", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
