/* SPDX-License-Identifier: Apache-2.0
 *
 * gpuprov driver ABI, version 1.5: the only contract between the gpuprov host and a cloud driver.
 *
 * TRUST MODEL. A driver is a shared object loaded into the gpuprov process with
 * RTLD_NOW | RTLD_LOCAL. It is trusted like the host itself: it runs with the user's
 * credentials. The ABI protects against honest mistakes (old or new builds, half-implemented
 * drivers), not against malice.
 *
 * COMPATIBILITY POLICY.
 * - The ABI version (major.minor) is separate from the product version.
 * - A driver states the minimum ABI it needs (abi_major, abi_minor_required). The host accepts
 *   it when abi_major == GPUPROV_ABI_VERSION_MAJOR and abi_minor_required <=
 *   GPUPROV_ABI_VERSION_MINOR; otherwise it refuses that driver, naming both versions, and
 *   loads the others.
 * - Every boundary struct starts with `uint32_t struct_size` and only grows at the end. Members
 *   are never removed or reordered; new ones are marked "since ABI 1.x". A reader reads
 *   struct_size first and reads a member only when offset + width <= struct_size; a member the
 *   struct does not reach counts as zero or NULL, and a struct that does not reach a member the
 *   reader requires is refused (the host requires the whole 1.0 descriptor, the SDK the whole
 *   1.0 init input). A struct larger than the reader knows comes from a newer minor: the
 *   reader uses the members it knows and ignores the rest. Members added in a minor are
 *   therefore optional for readers; a driver that needs the host to read one states that minor
 *   in abi_minor_required, and an older host refuses it by the rule above. (Hosts of ABI 1.0
 *   refused any larger struct; a driver that must load in one is built with the 1.0 header.)
 * - A replaced function keeps its slot; the successor is appended with a _v2 suffix.
 * - Capability bits: since ABI 1.3 a host lists the bits it does not know (`gpuprov drivers`
 *   shows them as unknown:0x...) and ignores them, so a newer driver that sets a bit added in
 *   a later minor still loads in an older host, which never calls what that bit promises.
 *   (Hosts of ABI 1.2 and older refused such a driver.) A bit that changes what the host must
 *   do, not only what it may call, therefore needs the driver to require its minor as well.
 * - Changing this file without moving GPUPROV_ABI_VERSION_* fails the test abi_guard_test.
 *
 * OWNERSHIP. Names say who owns memory: *_host_owned is owned by the host and borrowed by the
 * driver only for the duration of the call; *_drv_owned is owned by the driver and stays valid
 * until the next call on the same driver handle, or gpuprov_drv_vtable.destroy(). Neither side
 * frees the other's memory. Strings are UTF-8; JSON documents travel as (pointer, length) and
 * are not NUL-terminated unless stated.
 *
 * ERRORS. Fallible calls return gpuprov_type_status; GPUPROV_STATUS_OK is 0. On any other status
 * gpuprov_drv_vtable.last_error(handle) returns a driver-owned, NUL-terminated message that
 * says what went wrong and what to do; it never contains credentials.
 *
 * THREADS. The host calls one driver handle from one thread at a time. Host callbacks may be
 * called only from inside a driver call, on the calling thread.
 *
 * JSON SCHEMAS of requests and results are documented in docs/driver-protocol.md.
 */
#ifndef GPUPROV_DRIVER_ABI_H_
#define GPUPROV_DRIVER_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUPROV_ABI_VERSION_MAJOR 1
#define GPUPROV_ABI_VERSION_MINOR 5

/* First member after struct_size in the descriptor: tells a gpuprov driver from any other .so
 * that happens to export the entry symbol name. Not a security measure. ('GPPV') */
#define GPUPROV_DRIVER_MAGIC 0x47505056u

/* The one symbol a driver exports. */
#define GPUPROV_DRIVER_ENTRY_SYMBOL "gpuprov_driver_entry"

/* Status codes. 0 is success; the others tell the host how to report and whether to retry. */
typedef int32_t gpuprov_type_status;
#define GPUPROV_STATUS_OK 0
#define GPUPROV_STATUS_FAILED 1        /* anything not covered below */
#define GPUPROV_STATUS_INVALID_INPUT 2 /* the request is wrong: a field, a GPU type, a region */
#define GPUPROV_STATUS_AUTH 3          /* credentials missing or refused */
#define GPUPROV_STATUS_NOT_FOUND 4     /* the VM (or resource) does not exist */
#define GPUPROV_STATUS_CAPACITY 5      /* the cloud has no capacity for this request now */
#define GPUPROV_STATUS_QUOTA 6         /* the account's quota or limit forbids it */
#define GPUPROV_STATUS_UNSUPPORTED 7   /* the driver does not implement this operation */
#define GPUPROV_STATUS_CANCELLED 8     /* the host asked to cancel */
#define GPUPROV_STATUS_TRANSIENT 9     /* retried inside the driver and still failing */

/* Capability bits. A bit promises the vtable functions listed next to it. A host ignores bits
 * it does not know (COMPATIBILITY POLICY). */
#define GPUPROV_CAP_BOOT_CLOUD_INIT (1u << 0)     /* runs cloud-init user data at boot */
#define GPUPROV_CAP_BOOT_STARTUP_SCRIPT (1u << 1) /* runs a startup script at boot */
#define GPUPROV_CAP_OPEN_PORTS (1u << 2)          /* can open ports: needs open_ports */
#define GPUPROV_CAP_HOSTS_KUBERNETES (1u << 3)    /* a VM can become a k3s node */
#define GPUPROV_CAP_VM_LIFECYCLE (1u << 4) /* needs check, offers, create, get, list, delete_vm */
/* Since ABI 1.5: the driver makes several VMs of one cluster that reach each other: create
 * honours the request's "cluster" (tags, the cluster's private network where the cloud has
 * one, peer ports open between members only), VM objects carry "private_ip", "cluster" and
 * "role", and the vtable has open_peer_ports. A 1.4 host ignores the bit and makes no cluster
 * with the driver, so the bit needs no higher required minor. */
#define GPUPROV_CAP_CLUSTER (1u << 5) /* needs open_peer_ports */
/* Since ABI 1.5: sells spot (preemptible) VMs: create takes "spot": true, offers carry
 * spot_price_per_hour, and a VM the cloud took back has state "preempted". No vtable slot. */
#define GPUPROV_CAP_SPOT (1u << 6)

/* Since ABI 1.4: values of gpuprov_type_driver_descriptor.node_address, how a VM of the cloud
 * learns its own public IPv4 address (the node installer's --public-ip-source). */
#define GPUPROV_NODE_ADDRESS_EC2 "ec2"                   /* EC2 IMDSv2/v1 public-ipv4 */
#define GPUPROV_NODE_ADDRESS_OPENSTACK "openstack"       /* Nova's EC2-compatible public-ipv4 */
#define GPUPROV_NODE_ADDRESS_GCE "gce"                   /* GCE access-configs/0/external-ip */
#define GPUPROV_NODE_ADDRESS_DIGITALOCEAN "digitalocean" /* droplet metadata v1 */
#define GPUPROV_NODE_ADDRESS_NEBIUS "nebius"             /* Nebius IMDS network-data */
#define GPUPROV_NODE_ADDRESS_INTERFACE "interface"       /* on a network interface (no NAT) */
#define GPUPROV_NODE_ADDRESS_NONE "none"                 /* no way: the host tells the node */

/* Log levels for gpuprov_type_host_api.log. */
typedef int32_t gpuprov_type_log_level;
#define GPUPROV_LOG_DEBUG 0
#define GPUPROV_LOG_INFO 1
#define GPUPROV_LOG_WARNING 2
#define GPUPROV_LOG_ERROR 3

/* A JSON document: UTF-8 bytes, not NUL-terminated. */
typedef struct gpuprov_type_json {
  const char* data;
  size_t len;
} gpuprov_type_json;

/* Opaque driver handle: created by init, freed by destroy. */
typedef struct gpuprov_type_driver gpuprov_type_driver;

/* Callbacks the host gives a driver at init. OWNERSHIP: host-owned; valid until destroy. */
typedef struct gpuprov_type_host_api {
  uint32_t struct_size;
  void* host_ctx; /* passed back as the first argument of every callback */
  /* A log line. The host redacts nothing: drivers must not log secrets. */
  void (*log)(void* host_ctx, gpuprov_type_log_level level, const char* msg_drv_owned,
              size_t msg_len);
  /* A progress line for the user ("waiting for droplet 123 to become active"). */
  void (*progress)(void* host_ctx, const char* msg_drv_owned, size_t msg_len);
  /* True once the user asked to stop (Ctrl-C); long waits poll it and return CANCELLED. */
  bool (*cancelled)(void* host_ctx);
} gpuprov_type_host_api;

/* Input to init. OWNERSHIP: host-owned, borrowed for the call; copy what you keep. */
typedef struct gpuprov_type_init_input {
  uint32_t struct_size;
  const gpuprov_type_host_api* host;
  /* The driver's settings as JSON: {"endpoint": "...", "config": {<[clouds.NAME] table>}}. */
  gpuprov_type_json config_host_owned;
} gpuprov_type_init_input;

/* One operation: request in, result out. result_drv_owned is valid until the next call on the
 * handle. On a non-OK status the result is unset and last_error explains. */
typedef gpuprov_type_status (*gpuprov_drv_op_fn)(gpuprov_type_driver* driver,
                                                   gpuprov_type_json request_host_owned,
                                                   gpuprov_type_json* result_drv_owned);

/* The driver's function table. OWNERSHIP: static in the driver. */
typedef struct gpuprov_drv_vtable {
  uint32_t struct_size;
  /* Required. Creates a handle. May return a handle together with a non-OK *status, so the
   * host can read last_error; the host then calls destroy. NULL means out of memory. */
  gpuprov_type_driver* (*init)(const gpuprov_type_init_input* input_host_owned,
                               gpuprov_type_status* status);
  /* Required. Frees the handle and everything it owns. */
  void (*destroy)(gpuprov_type_driver* driver);
  /* Required. The message of the last failed call on this handle; "" when none. */
  const char* (*last_error)(gpuprov_type_driver* driver);
  /* GPUPROV_CAP_VM_LIFECYCLE. */
  gpuprov_drv_op_fn check;     /* credentials: one cheap read-only API call */
  gpuprov_drv_op_fn offers;    /* what GPU types/regions it can serve for a request; the
                                * result may carry "powered_off_cost": "none", "disk" or "full",
                                * what a VM powered off from inside still costs on the cloud
                                * (gpuprov's TTL powers VMs off); absent: unknown */
  gpuprov_drv_op_fn create;    /* idempotent by VM name: returns the existing VM if present */
  gpuprov_drv_op_fn get;       /* one VM by id or name */
  gpuprov_drv_op_fn list;      /* every VM tagged by gpuprov */
  gpuprov_drv_op_fn delete_vm; /* the VM and what the driver created for it */
  /* GPUPROV_CAP_OPEN_PORTS. */
  gpuprov_drv_op_fn open_ports;
  /* Since ABI 1.2, optional, both or neither (no capability bit: a 1.1 host refuses unknown
   * bits, so the host reads struct_size and the pointers). `gpuprov gc` uses them to find and
   * remove what a lost run left behind. NULL, or a table that does not reach them: the driver
   * cannot list its leftovers. */
  gpuprov_drv_op_fn list_resources;  /* everything on the cloud that carries gpuprov's marks */
  gpuprov_drv_op_fn delete_resource; /* one of those by kind and id; refuses any other */
  /* Since ABI 1.5, GPUPROV_CAP_CLUSTER: lets every listed peer of a cluster reach the peer
   * ports of every other one (private addresses where set, else public) and takes that access
   * from peers no longer listed; idempotent. A table that does not reach it has none. */
  gpuprov_drv_op_fn open_peer_ports;
} gpuprov_drv_vtable;

/* Since ABI 1.1: the type of a value in a driver's [clouds.NAME] table of config.toml. */
typedef int32_t gpuprov_type_config_type;
#define GPUPROV_CONFIG_STRING 1
#define GPUPROV_CONFIG_INTEGER 2 /* a TOML integer, passed as a JSON number */
#define GPUPROV_CONFIG_BOOLEAN 3
/* Since ABI 1.3: a TOML array of strings, passed as a JSON array of strings. */
#define GPUPROV_CONFIG_STRING_LIST 4
/* Since ABI 1.3: a TOML table (inline `key = {a = 1}` or a `[clouds.NAME.key]` section) whose
 * keys are the key's `members`, each a string, integer, boolean or string list; passed as a
 * JSON object. The host checks each member as it checks a key. */
#define GPUPROV_CONFIG_TABLE 5

/* Since ABI 1.1: one key a driver accepts in its [clouds.NAME] table. OWNERSHIP: static in the
 * driver, never freed. */
typedef struct gpuprov_type_config_key {
  uint32_t struct_size;
  gpuprov_type_config_type type;
  const char* name; /* [a-z0-9_]+, at most 64 bytes; unique within the driver */
  const char* help; /* one line for `gpuprov drivers NAME` */
  /* Since ABI 1.3. Non-NULL: this key is a former name of the declared key replaced_by names.
   * The host accepts it with a warning naming that key (file:line) and passes its value under
   * the new name, so the driver reads only the new one; type, help and members of a former
   * name are not read (the new key's apply). replaced_by names a declared key that is not
   * itself a former name, or a member of a declared table as "table.member" (the value then
   * goes into that table). */
  const char* replaced_by;
  /* Since ABI 1.3, GPUPROV_CONFIG_TABLE only: the keys of the table, member_count pointers;
   * none of them a table or a former name. */
  const struct gpuprov_type_config_key* const* members;
  size_t member_count;
} gpuprov_type_config_key;

/* The static descriptor returned by the entry symbol. Readable without init: `gpuprov drivers`
 * reads only this. OWNERSHIP: static in the driver, never freed. */
typedef struct gpuprov_type_driver_descriptor {
  uint32_t struct_size;
  uint32_t magic; /* GPUPROV_DRIVER_MAGIC */
  uint16_t abi_major;
  uint16_t abi_minor_required;
  const char* name;        /* cloud name, [a-z0-9_-]+; must match the file name */
  const char* version;     /* the driver's own version, e.g. "0.1.0" */
  const char* description; /* one line */
  uint64_t capabilities;   /* GPUPROV_CAP_* bits */
  const gpuprov_drv_vtable* vtable;
  /* Since ABI 1.1: the keys the driver accepts in its [clouds.NAME] table, as config_key_count
   * pointers. The host refuses any other key and a value of another type before init, naming
   * the file and line; `endpoint` is the host's own key and always allowed. NULL: the driver
   * declares nothing and gets its table unchecked, as every 1.0 driver does. A key of a type
   * added in 1.3 (a string list, a table) or with replaced_by needs a 1.3 host: the driver
   * requires minor 3 (the SDK does so by itself when its table has one). */
  const gpuprov_type_config_key* const* config_keys;
  size_t config_key_count;
  /* Since ABI 1.4: one of GPUPROV_NODE_ADDRESS_*, how a VM of this cloud learns its public
   * address, which the node installer puts in the API certificate on the boot route. NULL, or
   * a value this host does not know (a newer minor's): the installer tries the EC2, GCE and
   * DigitalOcean metadata services in turn, as with every 1.3 driver. */
  const char* node_address;
} gpuprov_type_driver_descriptor;

/* The entry a driver exports as GPUPROV_DRIVER_ENTRY_SYMBOL. Must not allocate, start threads
 * or touch the network: it returns a pointer to static data. */
typedef const gpuprov_type_driver_descriptor* (*gpuprov_driver_entry_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUPROV_DRIVER_ABI_H_ */
