#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A documented client's walk through the Lambda Cloud and Hyperstack emulators, with the
stdlib's urllib (no SDK of either cloud is packaged for Debian): each step is what the
reference (plugins/lambda/REFERENCE.md, plugins/hyperstack/REFERENCE.md) tells a client
to do, in that order,
and the emulator's control API then checks reachability and that nothing is left behind.
The Lambda client paces itself as documented (about 1 request/s, launch 1 per 12 s) with the
emulator's rate limits on, and backs off on a 429. Stdlib unittest only.

The emulator binary: $GPUPROV_EMULATOR, else <repo>/build-emu/bin/gpuprov-emulator.
"""
import base64
import json
import time
import unittest
import urllib.error
import urllib.request

from emulator_fixture import Emulator, bypass_proxy_for_loopback, wait_for

LAMBDA_KEY = "secret_client_test_lambda"
HYPERSTACK_KEY = "client-test-hyperstack"
PUBLIC_KEY = ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPtlieUdwvU3Yi8XHX36t5VZpca1by3GqjV+S0aD87Tm "
              "emu-test")
USER_DATA = "#cloud-config\nruncmd:\n  - [touch, /run/gpuprov-client-test]\n"


def setUpModule():
    bypass_proxy_for_loopback()


def request(url, method="GET", body=None, headers=None):
    """(status, parsed JSON or None, headers) of one call; HTTP errors are answers too."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
            return r.status, (json.loads(text) if text else None), r.headers
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, (json.loads(text) if text else None), e.headers


def allowed_ports(emu, cloud, instance_id):
    rows = emu.control("GET", "/instances?cloud=" + cloud)["instances"]
    for row in rows:
        if row["id"] == str(instance_id):
            return set(row["allowed_ports"])
    return None


class LambdaClient:
    """Bearer auth, a process-wide pace of one request per 1.25 s and one launch per 12.5 s,
    and on a 429 a back-off (2 s, doubling, 5 tries) as the reference advises; throttled
    counts the 429s it saw (a loaded machine can delay one request more than the next)."""

    def __init__(self, base):
        self.base = base
        self.last = 0.0
        self.last_launch = -100.0
        self.throttled = 0

    def call(self, method, path, body=None, auth=None):
        backoff = 2.0
        for _ in range(5):
            wait = self.last + 1.25 - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if path == "/instance-operations/launch":
                wait = self.last_launch + 12.5 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                self.last_launch = time.monotonic()
            self.last = time.monotonic()
            headers = {"Authorization": auth or "Bearer " + LAMBDA_KEY}
            answer = request(self.base + path, method, body, headers)
            if answer[0] != 429:
                return answer
            self.throttled += 1
            time.sleep(backoff)
            backoff *= 2
        return answer


class LambdaWalk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.emu = Emulator("lambda", ["--boot-seconds", "1"], {"LAMBDA_API_KEY": LAMBDA_KEY})
        cls.api = LambdaClient(cls.emu.urls["lambda"])

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()

    def test_a_wrong_key_is_401_invalid_api_key(self):
        status, body, _ = request(self.emu.urls["lambda"] + "/instances",
                                  headers={"Authorization": "Bearer nope"})
        self.assertEqual(status, 401)
        self.assertEqual(body["error"]["code"], "global/invalid-api-key")

    def test_b_create_reach_and_delete_keeping_the_users_firewall_rule(self):
        api, name = self.api, "gpuprov-client-walk"
        # Offers: a map keyed by type name with live capacity.
        status, types, _ = api.call("GET", "/instance-types")
        self.assertEqual(status, 200)
        self.assertNotIn("gpu_1x_l4", types["data"])
        offer = types["data"]["gpu_1x_h100_pcie"]
        region = offer["regions_with_capacity_available"][0]["name"]
        # SSH key, listed the curl way (Basic, key as user, empty password).
        basic = "Basic " + base64.b64encode((LAMBDA_KEY + ":").encode()).decode()
        status, keys, _ = api.call("GET", "/ssh-keys", auth=basic)
        self.assertEqual((status, keys["data"]), (200, []))
        status, key, _ = api.call("POST", "/ssh-keys", {"name": "gpuprov-test",
                                                        "public_key": PUBLIC_KEY})
        self.assertEqual(status, 200, key)
        # The user has a rule of their own; the client reads, adds its rules, writes.
        status, rules, _ = api.call("GET", "/firewall-rules")
        users_rule = {"protocol": "tcp", "port_range": [8888, 8888],
                      "source_network": "203.0.113.0/24", "description": "my jupyter"}
        status, _, _ = api.call("PUT", "/firewall-rules", {"data": rules["data"] + [users_rule]})
        self.assertEqual(status, 200)
        status, rules, _ = api.call("GET", "/firewall-rules")
        ours = [{"protocol": "tcp", "port_range": [p, p], "source_network": "0.0.0.0/0",
                 "description": "gpuprov: " + name} for p in (6443, 80, 443)]
        status, written, _ = api.call("PUT", "/firewall-rules", {"data": rules["data"] + ours})
        self.assertEqual(status, 200, written)
        # Find by name first (launch has no idempotency token), then launch.
        status, listed, _ = api.call("GET", "/instances")
        self.assertEqual([i for i in listed["data"] if i["name"] == name], [])
        status, launched, _ = api.call("POST", "/instance-operations/launch", {
            "region_name": region, "instance_type_name": "gpu_1x_h100_pcie",
            "ssh_key_names": ["gpuprov-test"], "name": name, "user_data": USER_DATA,
            "tags": [{"key": "gpuprov", "value": name}], "quantity": 1})
        self.assertEqual(status, 200, launched)
        (iid,) = launched["data"]["instance_ids"]
        # Wait for active with an IP.
        deadline = time.monotonic() + 60
        while True:
            status, got, _ = api.call("GET", "/instances/" + iid)
            self.assertEqual(status, 200, got)
            inst = got["data"]
            # Lambda's spec types ip as a string, absent until known (never null).
            if inst["status"] == "active" and inst.get("ip"):
                break
            self.assertIn(inst["status"], ("booting", "active"))
            self.assertLess(time.monotonic(), deadline)
        self.assertTrue(inst["ip"].startswith("127."))
        self.assertEqual(inst["tags"], [{"key": "gpuprov", "value": name}])
        # The account-wide rules decide reachability; the user's rule is for another network.
        self.assertEqual(allowed_ports(self.emu, "lambda", iid), {22, 80, 443, 6443})
        # Terminate; wait until it is gone.
        status, done, _ = api.call("POST", "/instance-operations/terminate",
                                   {"instance_ids": [iid]})
        self.assertEqual(done["data"]["terminated_instances"][0]["status"], "terminating")
        while api.call("GET", "/instances/" + iid)[0] != 404:
            self.assertLess(time.monotonic(), deadline + 30)
        # Remove only our rules: the user's survives.
        status, rules, _ = api.call("GET", "/firewall-rules")
        kept = [r for r in rules["data"] if not r["description"].startswith("gpuprov: ")]
        api.call("PUT", "/firewall-rules", {"data": kept})
        status, rules, _ = api.call("GET", "/firewall-rules")
        self.assertIn(users_rule, rules["data"])
        self.assertEqual(len(rules["data"]), 3)  # SSH, ICMP, the user's
        status, _, _ = api.call("DELETE", "/ssh-keys/" + key["data"]["id"])
        self.assertEqual(status, 200)
        counts = self.emu.counts()
        self.assertEqual(counts["instances"], 0)
        self.assertEqual(counts["ssh_keys"], 0)
        self.assertEqual(counts["rulesets"], 0)
        self.assertEqual(counts["firewall_rules"], 1)  # the user's own
        self.assertTrue(wait_for(lambda: self.emu.counts()["backend_instances"] == 0))
        # The client paced itself: every 429 the emulator counted is one it saw (normally 0).
        self.assertEqual(counts["rate_limited"], api.throttled)
        self.assertLessEqual(api.throttled, 1)

    def test_c_a_misspelt_field_or_a_wrong_type_is_400_and_hurrying_is_429(self):
        api = self.api
        for body in ({"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
                      "ssh_key_names": ["k"], "userdata": USER_DATA},
                     {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10",
                      "ssh_key_names": ["k"], "user_data": {"base64": "IyEvYmluL3No"}}):
            status, err, _ = api.call("POST", "/instance-operations/launch", body)
            self.assertEqual(status, 400)
            self.assertEqual(err["error"]["code"], "global/invalid-parameters")
        before = self.emu.counts()["rate_limited"]
        statuses = [request(self.emu.urls["lambda"] + "/instances",
                            headers={"Authorization": "Bearer " + LAMBDA_KEY})[0]
                    for _ in range(3)]
        self.assertIn(429, statuses)
        self.assertGreater(self.emu.counts()["rate_limited"], before)
        api.last = time.monotonic()  # keep the pace for whatever follows


class HyperstackWalk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.emu = Emulator("hyperstack", ["--boot-seconds", "1"],
                           {"HYPERSTACK_API_KEY": HYPERSTACK_KEY})
        cls.base = cls.emu.urls["hyperstack"]

    @classmethod
    def tearDownClass(cls):
        cls.emu.stop()

    def call(self, method, path, body=None):
        return request(self.base + path, method, body, {"api_key": HYPERSTACK_KEY})

    def test_a_a_bearer_token_is_not_the_api_key_header(self):
        status, body, _ = request(self.base + "/core/environments",
                                  headers={"Authorization": "Bearer " + HYPERSTACK_KEY})
        self.assertEqual(status, 401)
        self.assertEqual((body["status"], body["error_reason"]), (False, "unauthorized"))

    def test_b_create_reach_open_a_port_and_delete(self):
        region, name = "CANADA-1", "gpuprov-client-walk"
        env_name = "gpuprov-" + region
        # Environment: use or create, once.
        status, envs, _ = self.call("GET", "/core/environments")
        if not [e for e in envs["environments"] if e["name"] == env_name]:
            status, env, _ = self.call("POST", "/core/environments",
                                       {"name": env_name, "region": region})
            self.assertEqual(status, 200, env)
        env_id = [e for e in self.call("GET", "/core/environments")[1]["environments"]
                  if e["name"] == env_name][0]["id"]
        # Flavor for H100:1 in stock, an image of the region.
        status, flavors, _ = self.call("GET", "/core/flavors?region=" + region)
        flavor = [f for g in flavors["data"] for f in g["flavors"]
                  if f["gpu"].startswith("H100") and f["gpu_count"] == 1
                  and f["stock_available"]][0]["name"]
        status, images, _ = self.call("GET", "/core/images?region=" + region)
        image = [i["name"] for g in images["images"] for i in g["images"]
                 if i["name"].startswith("Ubuntu Server 22.04") and "CUDA" in i["name"]][0]
        # Key pair: reuse by key and environment, else import.
        status, keys, _ = self.call("GET", "/core/keypairs")
        mine = [k for k in keys["keypairs"] if k["environment"]["name"] == env_name
                and k["public_key"].split()[:2] == PUBLIC_KEY.split()[:2]]
        if not mine:
            status, imported, _ = self.call("POST", "/core/keypairs", {
                "name": "gpuprov", "environment_name": env_name, "public_key": PUBLIC_KEY})
            self.assertEqual(status, 200, imported)
            mine = [imported["keypair"]]
        # Find by name, then create.
        status, listed, _ = self.call("GET", "/core/virtual-machines?search=" + name)
        self.assertEqual([v for v in listed["instances"] if v["name"] == name], [])
        rules = [{"direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
                  "remote_ip_prefix": "0.0.0.0/0", "port_range_min": p, "port_range_max": p}
                 for p in (22, 6443, 80, 443)]
        status, created, _ = self.call("POST", "/core/virtual-machines", {
            "name": name, "environment_name": env_name, "image_name": image,
            "flavor_name": flavor, "key_name": mine[0]["name"], "count": 1,
            "assign_floating_ip": True, "enable_port_randomization": False,
            "security_rules": rules, "user_data": USER_DATA,
            "labels": ["gpuprov", "gpuprov-name=" + name]})
        self.assertEqual(status, 200, created)
        vm_id = created["instances"][0]["id"]
        self.assertEqual(created["instances"][0]["status"], "CREATING")

        def vm():
            return self.call("GET", "/core/virtual-machines/%d" % vm_id)[1]["instance"]

        # Ready = ACTIVE, vm_state active and the floating IP attached (it comes later).
        self.assertTrue(wait_for(lambda: vm()["status"] == "ACTIVE", 30))
        self.assertTrue(wait_for(lambda: vm()["floating_ip_status"] == "ATTACHED", 30))
        got = vm()
        self.assertEqual(got["vm_state"], "active")
        self.assertTrue(got["floating_ip"].startswith("127."))
        self.assertEqual(allowed_ports(self.emu, "hyperstack", vm_id), {22, 80, 443, 6443})
        # open_ports: a rule added to the running VM, then removed.
        status, added, _ = self.call("POST", "/core/virtual-machines/%d/sg-rules" % vm_id, {
            "direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
            "remote_ip_prefix": "0.0.0.0/0", "port_range_min": 8080, "port_range_max": 8080})
        self.assertEqual(status, 200, added)
        self.assertIn(8080, allowed_ports(self.emu, "hyperstack", vm_id))
        status, _, _ = self.call("DELETE", "/core/virtual-machines/%d/sg-rules/%d"
                                 % (vm_id, added["security_rule"]["id"]))
        self.assertEqual(status, 200)
        self.assertNotIn(8080, allowed_ports(self.emu, "hyperstack", vm_id))
        # A cluster peer's rule: udp 51820 from another VM's fixed_ip (its address on the
        # environment's private network); it goes with the VM.
        self.assertTrue(got["fixed_ip"].startswith("10."), got)
        status, peer, _ = self.call("POST", "/core/virtual-machines/%d/sg-rules" % vm_id, {
            "direction": "ingress", "protocol": "udp", "ethertype": "IPv4",
            "remote_ip_prefix": "10.64.0.3/32", "port_range_min": 51820,
            "port_range_max": 51820})
        self.assertEqual(status, 200, peer)
        self.assertEqual((peer["security_rule"]["protocol"],
                          peer["security_rule"]["remote_ip_prefix"]), ("udp", "10.64.0.3/32"))
        self.assertEqual(allowed_ports(self.emu, "hyperstack", vm_id), {22, 80, 443, 6443})
        # Delete (async): DELETING, then 404.
        status, _, _ = self.call("DELETE", "/core/virtual-machines/%d" % vm_id)
        self.assertEqual(status, 200)
        self.assertTrue(wait_for(
            lambda: self.call("GET", "/core/virtual-machines/%d" % vm_id)[0] == 404, 30))
        self.assertEqual(self.call("DELETE", "/core/keypair/%d" % mine[0]["id"])[0], 200)
        self.assertEqual(self.call("DELETE", "/core/environments/%d" % env_id)[0], 200)
        counts = self.emu.counts()
        for what in ("instances", "ssh_keys", "environments", "security_rules", "rate_limited"):
            self.assertEqual(counts[what], 0, what)
        self.assertTrue(wait_for(lambda: self.emu.counts()["backend_instances"] == 0))

    def test_c_base64_user_data_in_an_object_or_a_misspelt_key_is_400(self):
        for extra in ({"user_data": {"encoding": "base64", "data": "IyEvYmluL3No"}},
                      {"keyname": "gpuprov"}):
            body = {"name": "x", "environment_name": "default-CANADA-1",
                    "image_name": "Ubuntu Server 22.04 LTS", "flavor_name": "n3-A100x1",
                    "key_name": "gpuprov", "count": 1}
            body.update(extra)
            status, err, _ = self.call("POST", "/core/virtual-machines", body)
            self.assertEqual(status, 400, err)
            self.assertEqual((err["status"], err["error_reason"]), (False, "bad_request"))
            self.assertIn(list(extra)[0], err["message"])

    def test_d_prices_and_pages_as_the_sdk_names_them(self):
        # H-SDK pricebook_api.py get_pricebook: GET /pricebook, a bare list of PricebookModel.
        status, book, _ = self.call("GET", "/pricebook")
        self.assertEqual(status, 200, book)
        self.assertIsInstance(book, list)
        prices = {p["name"]: p["value"] for p in book}
        self.assertGreater(prices["H100-80G-PCIe"], 0)
        # H-SDK list_environments/list_vms: query page and pageSize; the answer's page_size.
        for i in range(3):
            self.assertEqual(self.call("POST", "/core/environments",
                                       {"name": "walk-%d" % i, "region": "NORWAY-1"})[0], 200)
        status, page, _ = self.call("GET", "/core/environments?page=2&pageSize=2")
        self.assertEqual(status, 200, page)
        self.assertEqual((page["page"], page["page_size"], page["count"]), (2, 2, 4))
        self.assertEqual(len(page["environments"]), 2)
        for e in self.call("GET", "/core/environments?search=walk-")[1]["environments"]:
            self.assertEqual(self.call("DELETE", "/core/environments/%d" % e["id"])[0], 200)


if __name__ == "__main__":
    unittest.main()
