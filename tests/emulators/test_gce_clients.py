#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A real Compute Engine client against gpuprov-emulator: Debian's python3-libcloud
(GCE driver, service-account auth) gets a token with the key the emulator wrote,
lists zones, sizes and images, creates nodes (CPU and GPU, with a firewall rule),
lists and destroys them, and a firewall rule between tagged instances, with only the host
changed. Run with /usr/bin/python3
(Debian's packages load only there); stdlib unittest only.

libcloud 3.4 signs its JWT itself (RS256 with python3-cryptography) and posts it to
accounts.google.com/o/oauth2/token; the Compute connection and the auth connection
both get host 127.0.0.1, the emulator's port and plain http.

The emulator binary: $GPUPROV_EMULATOR, else <repo>/build-emu/bin/gpuprov-emulator.
"""
import json
import os
import tempfile
import time
import unittest
import urllib.parse

from emulator_fixture import Emulator, bypass_proxy_for_loopback, wait_for

PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm "
              "emu-test")


def setUpModule():
    global EMU, KEY, TMP
    bypass_proxy_for_loopback()
    TMP = tempfile.TemporaryDirectory()
    # A file that does not exist yet: the emulator writes its service-account key there.
    key_path = os.path.join(TMP.name, "key.json")
    EMU = Emulator("gcp", ["--boot-seconds", "0.5"], {"GOOGLE_APPLICATION_CREDENTIALS": key_path})
    with open(key_path) as f:
        KEY = json.load(f)
    KEY["path"] = key_path


def tearDownModule():
    EMU.stop()
    TMP.cleanup()


AUTH_PORT = [0]


def make_driver(datacenter="us-central1-a", key_path=None, email=None):
    """libcloud's GCE driver aimed at the emulator."""
    from libcloud.common import google
    from libcloud.compute.drivers import gce

    port = urllib.parse.urlsplit(EMU.urls["gcp"]).port

    # The credential class makes its auth connection itself: point it at the emulator.
    auth_cls = google.GoogleServiceAcctAuthConnection
    if not hasattr(auth_cls, "_gpuprov_original_init"):
        auth_cls._gpuprov_original_init = auth_cls.__init__

        def init_to_emulator(self, user_id, key, *args, **kwargs):
            kwargs.update(secure=False, host="127.0.0.1", port=AUTH_PORT[0])
            auth_cls._gpuprov_original_init(self, user_id, key, *args, **kwargs)
        auth_cls.__init__ = init_to_emulator
    AUTH_PORT[0] = port

    class ConnToEmulator(gce.GCEConnection):
        host = "127.0.0.1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.secure = False
            self.port = port

    class Driver(gce.GCENodeDriver):
        connectionCls = ConnToEmulator

    return Driver(email or KEY["client_email"], key_path or KEY["path"],
                  project=KEY["project_id"], datacenter=datacenter,
                  credential_file=os.path.join(TMP.name, "libcloud-token-" + str(time.time())))


class LibcloudGceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.driver = make_driver()

    def setUp(self):
        EMU.control("POST", "/reset", {"cloud": "gcp"})

    def test_zones_sizes_and_images(self):
        zones = {z.name for z in self.driver.ex_list_zones()}
        self.assertIn("us-central1-a", zones)
        self.assertIn("europe-west4-b", zones)
        regions = {r.name: r for r in self.driver.ex_list_regions()}
        self.assertIn("us-central1", regions)
        self.assertTrue(any(q["metric"] == "NVIDIA_L4_GPUS" for q in regions["us-central1"].quotas))
        sizes = {s.name: s for s in self.driver.list_sizes(location="us-central1-a")}
        self.assertIn("g2-standard-4", sizes)
        self.assertEqual(sizes["g2-standard-4"].extra["accelerators"][0]["guestAcceleratorType"],
                         "nvidia-l4")
        self.assertNotIn("g2-standard-4", {s.name for s in self.driver.list_sizes(location="us-central1-f")})
        image = self.driver.ex_get_image_from_family("ubuntu-2204-lts", ex_project_list=["ubuntu-os-cloud"])
        self.assertTrue(image.name.startswith("ubuntu-2204-jammy"))
        dlvm = self.driver.ex_get_image_from_family("common-cu128-ubuntu-2204-nvidia-570",
                                                    ex_project_list=["deeplearning-platform-release"])
        self.assertEqual(dlvm.extra["family"], "common-cu128-ubuntu-2204-nvidia-570")
        accels = self.driver.ex_list(self.driver.ex_list_firewalls)  # empty project: no rules
        self.assertEqual([fw for page in accels.page() for fw in page], [])

    def test_create_list_destroy(self):
        fw = self.driver.ex_create_firewall("libcloud-ssh", [{"IPProtocol": "tcp", "ports": ["22"]}],
                                            source_ranges=["0.0.0.0/0"], target_tags=["libcloud-ssh"])
        self.assertEqual(fw.name, "libcloud-ssh")
        self.assertEqual(EMU.counts()["firewalls"], 1)
        image = self.driver.ex_get_image_from_family("debian-12", ex_project_list=["debian-cloud"])
        cpu = self.driver.create_node("lc-cpu", "e2-standard-2", image,
                                      ex_tags=["libcloud-ssh"],
                                      ex_metadata={"items": [{"key": "ssh-keys",
                                                              "value": "root:" + PUBLIC_KEY}]},
                                      ex_labels={"gpuprov": "1", "team": "ml"})
        self.assertEqual(cpu.name, "lc-cpu")
        self.assertIn(cpu.extra["status"], ("PROVISIONING", "STAGING", "RUNNING"))
        dlvm = self.driver.ex_get_image_from_family("common-cu128-ubuntu-2204-nvidia-570",
                                                    ex_project_list=["deeplearning-platform-release"])
        gpu = self.driver.create_node("lc-l4", "g2-standard-4", dlvm,
                                      ex_on_host_maintenance="TERMINATE",
                                      ex_automatic_restart=True)
        self.assertEqual(gpu.size, "g2-standard-4")
        self.assertEqual(EMU.counts()["instances"], 2)

        def running():
            return all(n.state == "running" and n.public_ips and n.public_ips[0]
                       for n in self.driver.list_nodes())
        wait_for(running, timeout=20, every=0.2)
        nodes = {n.name: n for n in self.driver.list_nodes(ex_zone="all")}
        self.assertEqual(set(nodes), {"lc-cpu", "lc-l4"})
        self.assertTrue(nodes["lc-cpu"].public_ips[0].startswith("127."))
        self.assertEqual(nodes["lc-cpu"].extra["labels"], {"gpuprov": "1", "team": "ml"})
        self.assertEqual(nodes["lc-cpu"].extra["tags"], ["libcloud-ssh"])
        self.assertTrue(nodes["lc-l4"].extra["boot_disk"].name, "lc-l4")
        node = self.driver.ex_get_node("lc-cpu", "us-central1-a")
        self.assertEqual(node.extra["metadata"]["items"][0]["key"], "ssh-keys")

        # The internal address (networkInterfaces[0].networkIP) on the default network.
        self.assertTrue(nodes["lc-cpu"].private_ips[0].startswith("10."), nodes["lc-cpu"].private_ips)

        self.assertTrue(self.driver.destroy_node(nodes["lc-cpu"]))
        self.assertTrue(self.driver.destroy_node(nodes["lc-l4"]))
        self.assertEqual(self.driver.list_nodes(), [])
        self.assertTrue(self.driver.ex_destroy_firewall(fw))
        # Every resource count back to 0 (delayed_requests counts requests, not resources).
        counts = EMU.counts()
        counts.pop("delayed_requests")
        self.assertEqual(counts, {"instances": 0, "firewalls": 0, "ssh_keys": 0,
                                  "backend_instances": 0})

    def test_firewall_between_tagged_instances(self):
        """A rule whose sourceTags and targetTags are one network tag (a cluster's peers rule):
        libcloud sends and reads both lists; a second rule of the name is 409 alreadyExists."""
        from libcloud.common.google import ResourceExistsError
        allowed = [{"IPProtocol": "tcp", "ports": ["6443", "10250"]},
                   {"IPProtocol": "udp", "ports": ["51820"]}]
        fw = self.driver.ex_create_firewall("gpuprov-lc-peers", allowed,
                                            source_tags=["gpuprov-cluster-lc"],
                                            target_tags=["gpuprov-cluster-lc"])
        got = self.driver.ex_get_firewall("gpuprov-lc-peers")
        self.assertEqual(got.source_tags, ["gpuprov-cluster-lc"])
        self.assertEqual(got.target_tags, ["gpuprov-cluster-lc"])
        self.assertFalse(got.source_ranges)
        self.assertEqual(got.allowed, allowed)
        with self.assertRaises(ResourceExistsError):
            self.driver.ex_create_firewall("gpuprov-lc-peers", allowed,
                                           source_tags=["gpuprov-cluster-lc"],
                                           target_tags=["gpuprov-cluster-lc"])
        self.assertTrue(self.driver.ex_destroy_firewall(fw))
        self.assertEqual(EMU.counts()["firewalls"], 0)

    def test_gpu_without_terminate_is_refused(self):
        from libcloud.common.google import GoogleBaseError
        dlvm = self.driver.ex_get_image_from_family("common-cu128-ubuntu-2204-nvidia-570",
                                                    ex_project_list=["deeplearning-platform-release"])
        with self.assertRaises(GoogleBaseError) as ctx:
            self.driver.create_node("lc-migrate", "g2-standard-4", dlvm)
        self.assertIn("live migration", str(ctx.exception))
        self.assertEqual(EMU.counts()["instances"], 0)

    def test_capacity_error_arrives_in_the_operation(self):
        EMU.control("POST", "/faults", {"cloud": "gcp", "fault": "capacity"})
        image = self.driver.ex_get_image_from_family("debian-12", ex_project_list=["debian-cloud"])
        with self.assertRaises(Exception) as ctx:
            self.driver.create_node("lc-cap", "e2-standard-2", image)
        self.assertEqual(getattr(ctx.exception, "code", None),
                         "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", ctx.exception)
        self.assertIn("does not have enough resources", str(ctx.exception))
        self.assertEqual(EMU.counts()["instances"], 0)

    def test_a_foreign_key_gets_no_token(self):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()).decode()
        with self.assertRaises(Exception) as ctx:
            make_driver(key_path=pem)
        self.assertIn("Invalid JWT Signature", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
