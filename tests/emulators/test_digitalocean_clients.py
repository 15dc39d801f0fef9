#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real DigitalOcean clients against gpuprov-emulator: Debian's python3-libcloud
(DigitalOcean v2 driver) and python3-digitalocean list, create and destroy
droplets with only the host changed. Run with /usr/bin/python3 (Debian's
packages load only there); stdlib unittest only.

The emulator binary: $GPUPROV_EMULATOR, else <repo>/build-emu/bin/gpuprov-emulator.
"""
import os
import unittest
import urllib.parse

from emulator_fixture import Emulator, bypass_proxy_for_loopback, wait_for

TOKEN = "dop_v1_client_test_token"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm "
              "emu-test")
FINGERPRINT = "0c:89:58:97:3e:72:09:3a:d9:94:9c:9c:fa:12:ee:25"


def setUpModule():
    global EMU
    bypass_proxy_for_loopback()
    EMU = Emulator("digitalocean", ["--boot-seconds", "0.5", "--no-rate-limits"],
                   {"DIGITALOCEAN_TOKEN": TOKEN})
    base = EMU.urls["digitalocean"]  # http://127.0.0.1:P/v2
    # python-digitalocean's objects made without end_point read this.
    os.environ["DIGITALOCEAN_END_POINT"] = base + "/"


def tearDownModule():
    EMU.stop()


class LibcloudDigitalOcean(unittest.TestCase):
    def driver(self, token=TOKEN):
        from libcloud.compute.providers import get_driver
        from libcloud.compute.types import Provider
        cls = get_driver(Provider.DIGITAL_OCEAN)
        drv = cls(token, api_version="v2")
        url = urllib.parse.urlparse(EMU.urls["digitalocean"])
        # libcloud 3.4 cannot take host/port in the constructor.
        drv.connection.host = url.hostname
        drv.connection.port = url.port
        drv.connection.secure = False
        drv.connection.connection = None
        return drv

    def test_bad_token_is_invalid_creds(self):
        from libcloud.common.types import InvalidCredsError
        with self.assertRaises(InvalidCredsError) as ctx:
            self.driver("wrong").list_nodes()
        self.assertIn("Unable to authenticate you", str(ctx.exception))

    def test_list_create_destroy(self):
        drv = self.driver()
        sizes = {s.id: s for s in drv.list_sizes()}
        self.assertIn("gpu-h100x1-80gb", sizes)
        locations = {loc.id: loc for loc in drv.list_locations()}
        self.assertIn("nyc2", locations)
        images = {i.extra["slug"]: i for i in drv.list_images()}
        self.assertIn("ubuntu-22-04-x64", images)
        key = drv.create_key_pair("libcloud-key", PUBLIC_KEY)
        self.assertEqual(key.fingerprint, FINGERPRINT)

        before = {n.id for n in drv.list_nodes()}
        node = drv.create_node("libcloud-vm", sizes["s-1vcpu-1gb"], images["ubuntu-22-04-x64"],
                               locations["nyc2"],
                               ex_create_attr={"ssh_keys": [FINGERPRINT], "tags": ["libcloud"]},
                               ex_user_data="#!/bin/bash\ntrue\n")
        self.assertEqual(node.name, "libcloud-vm")
        self.assertEqual(node.state, "pending")

        def running():
            nodes = {n.id: n for n in drv.list_nodes()}
            n = nodes.get(node.id)
            return n is not None and n.state == "running" and n.public_ips
        self.assertTrue(wait_for(running))
        listed = {n.id: n for n in drv.list_nodes()}[node.id]
        self.assertTrue(listed.public_ips[0].startswith("127."))
        self.assertEqual(set(listed.extra["tags"]), {"libcloud"})
        self.assertEqual(listed.extra["size_slug"], "s-1vcpu-1gb")

        # A GPU droplet is hidden from list_nodes (GET /v2/droplets without type=gpus).
        gpu = drv.create_node("libcloud-gpu", sizes["gpu-h100x1-80gb"],
                              images["ubuntu-22-04-x64"], locations["nyc2"],
                              ex_create_attr={"ssh_keys": [FINGERPRINT]})
        self.assertNotIn(gpu.id, {n.id for n in drv.list_nodes()})

        # Pagination: libcloud reads links.pages.last and walks the pages.
        drv.ex_per_page = 1
        extra = [drv.create_node("libcloud-p%d" % i, sizes["s-1vcpu-1gb"],
                                 images["ubuntu-22-04-x64"], locations["nyc2"],
                                 ex_create_attr={"ssh_keys": [FINGERPRINT]})
                 for i in range(3)]
        all_ids = {n.id for n in drv.list_nodes()} - before
        self.assertEqual(all_ids, {node.id} | {e.id for e in extra})

        for n in [node, gpu] + extra:
            self.assertTrue(drv.destroy_node(n))
        self.assertEqual({n.id for n in drv.list_nodes()} - before, set())
        self.assertTrue(drv.delete_key_pair(key))


class PythonDigitalOcean(unittest.TestCase):
    def test_bad_token_raises(self):
        import digitalocean
        manager = digitalocean.Manager(token="wrong", end_point=EMU.urls["digitalocean"] + "/")
        with self.assertRaises(digitalocean.DataReadError) as ctx:
            manager.get_all_droplets()
        self.assertIn("Unable to authenticate you", str(ctx.exception))

    def test_list_create_destroy(self):
        import digitalocean
        end_point = EMU.urls["digitalocean"] + "/"
        manager = digitalocean.Manager(token=TOKEN, end_point=end_point)
        self.assertIn("gpu-h100x8-640gb", [s.slug for s in manager.get_all_sizes()])
        key = digitalocean.SSHKey(token=TOKEN, end_point=end_point, name="pydo-key",
                                  public_key=PUBLIC_KEY)
        key.create()
        key.load()
        self.assertEqual(key.fingerprint, FINGERPRINT)

        droplets = []
        for i in range(3):
            d = digitalocean.Droplet(token=TOKEN, end_point=end_point, name="pydo-vm%d" % i,
                                     region="nyc2", image="ubuntu-22-04-x64",
                                     size_slug="s-1vcpu-1gb", ssh_keys=[key.id],
                                     tags=["pydo"], user_data="#!/bin/bash\ntrue\n")
            d.create()
            self.assertTrue(d.id)
            self.assertEqual(len(d.action_ids), 1)
            droplets.append(d)

        # Waits on the create action (GET /v2/droplets/{id}/actions/{action_id}).
        actions = droplets[0].get_actions()
        self.assertEqual(actions[0].type, "create")
        self.assertTrue(actions[0].wait(update_every_seconds=0.2))

        # Pagination: with per_page=1 the client follows links.pages.next.
        listed = manager.get_all_droplets(params={"per_page": 1})
        self.assertEqual(sorted(d.name for d in listed), ["pydo-vm0", "pydo-vm1", "pydo-vm2"])
        self.assertEqual(len(manager.get_all_droplets(tag_name="pydo")), 3)

        def active(d):
            d.load()
            return d.status == "active" and d.ip_address
        self.assertTrue(wait_for(lambda: all(active(d) for d in droplets)))
        self.assertTrue(droplets[0].ip_address.startswith("127."))
        self.assertEqual(manager.get_droplet(droplets[1].id).name, "pydo-vm1")

        for d in droplets:
            self.assertTrue(d.destroy())
        with self.assertRaises(digitalocean.NotFoundError):
            manager.get_droplet(droplets[0].id)
        self.assertEqual(manager.get_all_droplets(), [])
        key.destroy()
        self.assertEqual(EMU.counts()["ssh_keys"], 0)


class PythonDigitalOceanVpc(unittest.TestCase):
    def test_a_droplet_in_a_vpc_has_its_private_address(self):
        # Issue 33: python-digitalocean's VPC (vpcs_create) and the droplet's vpc_uuid and
        # private address (networks.v4 type private).
        import digitalocean
        end_point = EMU.urls["digitalocean"] + "/"
        vpc = digitalocean.VPC(token=TOKEN, end_point=end_point, name="gpuprov-pydo",
                               region="nyc2", description="gpuprov cluster pydo")
        vpc.create()
        self.assertTrue(vpc.id)
        self.assertFalse(vpc.default)
        self.assertTrue(vpc.ip_range.startswith("10."))
        d = digitalocean.Droplet(token=TOKEN, end_point=end_point, name="pydo-vpc",
                                 region="nyc2", image="ubuntu-22-04-x64",
                                 size_slug="s-1vcpu-1gb", vpc_uuid=vpc.id,
                                 tags=["gpuprov-cluster:pydo"])
        d.create()

        def active():
            d.load()
            return d.status == "active" and d.private_ip_address
        self.assertTrue(wait_for(active))
        self.assertEqual(d.vpc_uuid, vpc.id)
        self.assertTrue(d.private_ip_address.startswith("10."), d.private_ip_address)
        manager = digitalocean.Manager(token=TOKEN, end_point=end_point)
        self.assertIn("gpuprov-pydo", [v.name for v in manager.get_all_vpcs()])
        self.assertTrue(d.destroy())
        vpc.destroy()
        self.assertNotIn("gpuprov-pydo", [v.name for v in manager.get_all_vpcs()])


class ZzNothingLeaked(unittest.TestCase):
    def test_zz_counts_are_zero(self):
        counts = EMU.counts()
        self.assertEqual(counts["instances"], 0, counts)
        self.assertEqual(counts["backend_instances"], 0, counts)


if __name__ == "__main__":
    # The clients leave keep-alive sockets to the GC; their ResourceWarnings are noise.
    unittest.main(warnings="ignore")
