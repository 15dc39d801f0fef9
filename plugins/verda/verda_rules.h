// SPDX-License-Identifier: Apache-2.0
//
// The Verda-specific rules of the driver that need no network, kept apart so they are
// unit-tested directly: where the client credentials come from, the error envelope and its
// code table, instance states, instance types, names of what gpuprov makes, and how a gpuprov
// instance is recognised. Facts from /work/shared/clouds/verda.md (section numbers in the
// comments).
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "catalogue.h"
#include "credentials.h"
#include "gpuprov/driver_abi.h"
#include "tags.h"
#include "vm_rules.h"

namespace gpuprov::verda {

inline constexpr const char* kDefaultEndpoint = "https://api.verda.com/v1";         // section 2
inline constexpr const char* kSshUser = "root";                                     // section 9
inline constexpr const char* kDefaultImage = "ubuntu-24.04-cuda-12.8-open-docker";  // section 9
/// The startup script's size limit is UNCONFIRMED (section 4); gpuprov's own choice, which the
/// config key startup_script_limit changes. The host sends the plain installer when it fits,
/// the gzip'd form otherwise.
inline constexpr size_t kDefaultScriptLimit = 64 * 1024;
using drivers::kResourcePrefix;

/// Hostnames are free text and not unique (section 3.3); gpuprov's are host-name-like and at
/// most 56 characters, so "gpuprov-<name>" (the startup script's name) stays within 64.
inline const drivers::VmNameRules kVmNameRules{
    .what = "a Verda instance hostname",
    .max_length = 56,
    .punctuation = "-",
    .note = "gpuprov names the VM's startup script gpuprov-<name>"};

/// The OAuth2 client credentials (section 1). Values are secrets: only `origin` may be shown.
struct ClientCredentials {
  std::string client_id;
  std::string client_secret;
  std::string origin;  ///< "$VERDA_CLIENT_ID/$VERDA_CLIENT_SECRET", or the file and profile
};

/// The credentials from, in order: the variables named by config client_id_env /
/// client_secret_env; $VERDA_CLIENT_ID/$VERDA_CLIENT_SECRET; $DATACRUNCH_CLIENT_ID/
/// $DATACRUNCH_CLIENT_SECRET (the DataCrunch SDK's names); the verda CLI's credentials file
/// (config credentials_file, else $VERDA_SHARED_CREDENTIALS_FILE, else
/// $VERDA_HOME/credentials, else ~/.verda/credentials), section $VERDA_PROFILE (config profile
/// first), else "default", keys verda_client_id and verda_client_secret. A pair is taken only
/// whole (an id without its secret is skipped).
std::optional<ClientCredentials> ResolveCredentials(const Poco::JSON::Object::Ptr& config);

/// The credentials file path the CLI uses ("" without HOME and the overrides).
std::string DefaultCredentialsFile();

/// What to tell a user whose credentials are missing or refused.
std::string CredentialsHint();

/// The JSON body of POST /oauth2/token for the client-credentials grant.
std::string TokenRequestBody(const ClientCredentials& credentials);

/// A token answer (section 1): access_token and expires_in (seconds; 3600 when absent).
struct AccessToken {
  std::string value;
  long long expires_in = 3600;
};
/// Throws DriverError(FAILED) when the body has no access_token.
AccessToken ParseTokenAnswer(const std::string& body);

/// The error envelope {"code","message"} (also "details"); a body that is not JSON is its own
/// message (section 8).
struct ApiError {
  std::string code;
  std::string message;
  /// "code: message", or the body cut short.
  std::string Text() const;
};
ApiError ParseApiError(const std::string& body);

/// The driver status of an answer: capacity ("Not enough resources") and quota words in the
/// message first, then the code table (section 8), else the HTTP status.
gpuprov_type_status StatusOf(int http_status, const ApiError& error);

/// An instance status (section 3.2) -> the protocol's state word and a message.
///   new, ordered, pending, validating, provisioning -> pending
///   running -> running once it has an ip (pending "running, waiting for its IP" before)
///   offline, starting_hibernation, hibernating, restoring -> stopped
///   no_capacity, error, installation_failed -> error (saying which)
///   deleting, discontinued, notfound, unknown -> terminated
///   anything else -> error naming it
struct VmState {
  std::string state;
  std::string message;
};
VmState StateOf(const std::string& verda_status, bool has_ip);

/// True for statuses of an instance that is gone or going (section 3.2: treat as absent).
bool IsGoneStatus(const std::string& verda_status);

/// True for "accepted, not yet placed" (new, ordered): a create may still end in no_capacity.
bool IsUnplacedStatus(const std::string& verda_status);

// ---- instance types (section 7) --------------------------------------------------------------

/// The reference's table as the kit's catalogue; the CPU default is CPU.4V.16G.
const drivers::Catalogue& TypeCatalogue();

/// "H100", "h100-80gb", "RTX_A6000", "a6000" -> the canonical name; nullopt for a GPU Verda
/// does not rent.
std::optional<std::string> CanonicalGpu(const std::string& requested);

/// The GPUs a type name says: "8H100.80S.176V" -> {"H100", 8}, "1A6000.10V" -> {"A6000", 1};
/// nullopt for CPU types and names not of the form <count><GPU>[.<mem><S>].<vCPUs>V.
struct TypeGpus {
  std::string gpu_type;
  int gpu_count = 0;
};
std::optional<TypeGpus> GpusOfTypeName(const std::string& type_name);

/// "H100:8" for a type name, "" when it names no GPU.
std::string GpusText(const std::string& type_name);

/// The types an availability answer lists per location (section 3.6:
/// [{"location_code", "availabilities": [type, ...]}]): location -> types.
std::map<std::string, std::vector<std::string>> ParseAvailability(const Poco::JSON::Array::Ptr& a);

// ---- names and recognition -------------------------------------------------------------------

/// "gpuprov-<vm>": the startup script made for a VM.
std::string ScriptName(const std::string& vm_name);

/// "gpuprov-<first 16 hex of sha256(key blob)>" for an OpenSSH public key line; throws
/// DriverError(INVALID_INPUT) naming ssh_public_key when the line is not a key.
std::string KeyName(const std::string& public_key_line);

/// The description gpuprov gives its instances: "gpuprov-managed VM <name> (gpuprov-name=<name>)".
std::string InstanceDescription(const std::string& vm_name);

/// The create body's tags ([{key, value}], section 3.1): gpuprov=1, gpuprov-name, then the
/// user's tags (keys fitted to letters, digits, '-', '_', '.', ':' and 63 characters).
Poco::JSON::Array::Ptr InstanceTags(const std::string& vm_name,
                                    const std::map<std::string, std::string>& user_tags);

/// The value of tag `key` of an instance ("" when absent).
std::string TagValue(const Poco::JSON::Object::Ptr& instance, const std::string& key);

/// True when gpuprov made the instance: tag gpuprov=1, or (an API that drops tags) the
/// description gpuprov writes for its hostname.
bool IsManaged(const Poco::JSON::Object::Ptr& instance);

/// The id of a create answer: a bare text id, a JSON string, or a JSON object with "id"
/// (section 2, 3.1); "" when none.
std::string IdOfCreateAnswer(const std::string& body);

/// The delete action's body: {"action":"delete","id":[id],"volume_ids":null,
/// "delete_permanently":true} (section 3.4).
std::string DeleteActionBody(const std::string& id);

/// What an action answer says about one instance (section 3.4): done, already gone ("Invalid
/// instance id", "Can't discontinue a discontinued instance"), not yet deletable ("Can't
/// discontinue a provisioning instance"), or another error.
enum class ActionOutcome { kDone, kGone, kNotYet, kFailed };
ActionOutcome ClassifyActionMessage(const std::string& message);

}  // namespace gpuprov::verda
