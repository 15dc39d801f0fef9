// SPDX-License-Identifier: Apache-2.0
//
// The Verda-specific rules of the driver that need no network, kept apart so they are
// unit-tested directly: where the client credentials come from, the error envelope and its
// code table, instance states, instance types, names of what gpuprov makes, and how a gpuprov
// instance is recognised. The vendor source is the official Verda OpenAPI spec ("Verda Cloud
// Public API", changelog up to 2026-09-25; V-SPEC in REFERENCE.md, vendored
// in gurdasnijor/effect-verda spec/verda.openapi.json @805db07); where our older notes
// (REFERENCE.md, whose section numbers the comments cite) disagree with it, the spec wins.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api_client.h"
#include "catalogue.h"
#include "cluster_request.h"
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

/// Verda's API as the kit's client reads it (api_client.h): the envelope (ParseApiError),
/// StatusOf, the AUTH/QUOTA/CAPACITY hints; answers may be JSON lists.
drivers::ApiDialect VerdaApi();

/// True when an answer to POST /instances says "no capacity": V-SPEC `POST /v1/instances`
/// answers 503 {"code":"service_unavailable","message":"No capacity available"} ("The requested
/// instance type has no capacity in the selected location"; the error table: service_unavailable
/// = "Not enough resources at the moment ... use a different resource", 503). Also a 5xx whose
/// message says capacity. A 503 without Verda's envelope (a proxy's page) is not: it stays an
/// ambiguous failure after which the create is looked up by name.
bool IsNoCapacityAnswer(int http_status, const ApiError& error);

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

/// True for a spot instance Verda took back: `is_spot` true and status `discontinued` (V-SPEC
/// instance status enum; Verda ends a spot instance by discontinuing it, and its OS volume then
/// follows `os_volume.on_spot_discontinue`: verda-cloud/sdk-python v1.20.0 release notes,
/// https://github.com/verda-cloud/sdk-python/releases/tag/v1.20.0). Such an instance is the
/// protocol's "preempted" (docs/driver-protocol.md "Spot VMs").
bool IsPreempted(const Poco::JSON::Object::Ptr& instance);

/// The message of a preempted instance: "spot instance discontinued by Verda (status
/// discontinued)".
std::string PreemptedMessage();

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

/// One row of GET /instance-types (V-SPEC schema InstanceType): its prices (strings in the
/// answer: `price_per_hour`, and `spot_price`, the hourly price of the type as a spot instance)
/// and `supported_os`, the OS image types the type can boot.
struct LiveType {
  double price_per_hour = 0;
  double spot_price_per_hour = 0;  ///< 0: no spot price given
  std::vector<std::string> supported_os;
};
/// instance_type -> row; rows without a name are skipped, an unreadable price is 0.
std::map<std::string, LiveType> ParseInstanceTypes(const Poco::JSON::Array::Ptr& a);

/// The types to try for a GPU request, best first: the table's preferred row, the table's
/// other rows with the same GPUs, then every type of the live list whose name reads as those
/// GPUs (cheapest first; the set changes, V-SPEC's own examples name types the table lacks).
/// Only types the live list has are kept when it is not empty. Throws DriverError
/// (INVALID_INPUT) when none has those GPUs, naming the counts Verda has for that GPU.
/// `canonical` is CanonicalGpu of the request.
std::vector<std::string> CandidateTypes(const std::string& canonical, int count,
                                        const std::map<std::string, LiveType>& live);

/// An image of GET /images (V-SPEC schema Os): image_type and is_default.
struct ImageRow {
  std::string image_type;
  bool is_default = false;
};

/// The image to deploy `type` with. `wanted` when the type's supported_os lists it, lists
/// nothing, or the user chose it (Verda decides then). Otherwise gpuprov's default image does
/// not fit the type (V-DS: A6000 and V100 answer "Operating system is not valid for this
/// instance type" for newer images), and the choice is, among `images` (GET
/// /images?instance_type=<type>) that supported_os lists, the one marked is_default, else the
/// first CUDA image, else the first; without images, the first CUDA image of supported_os.
std::string ChooseImage(const std::string& wanted, bool user_chose,
                        const std::vector<std::string>& supported_os,
                        const std::vector<ImageRow>& images);

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

/// Verda's tag limits (V-SPEC DeployInstancePublicDto.tags "Maximum 10", TagDto key maxLength
/// 63, value maxLength 127, "Keys are lowercased"; V-GO tags_types.go MaxTagsPerResource,
/// TagKeyMaxLength, TagValueMaxLength).
inline constexpr size_t kMaxTags = 10;
inline constexpr size_t kMaxTagKey = 63;
inline constexpr size_t kMaxTagValue = 127;

/// The create body's tags ([{key, value}]): gpuprov=1, gpuprov-name, for a cluster node
/// gpuprov-cluster=<name> and gpuprov-role=<role>, then the user's tags (keys lower-cased as
/// Verda stores them, fitted to letters, digits, '-', '_', '.', ':').
/// Throws DriverError(INVALID_INPUT) naming the tag, before anything is made, for more user
/// tags than kMaxTags leaves beside gpuprov's, a key over 63 or a value over 127 characters.
Poco::JSON::Array::Ptr InstanceTags(const std::string& vm_name,
                                    const std::map<std::string, std::string>& user_tags,
                                    const drivers::ClusterRequest* cluster = nullptr);

/// The value of tag `key` of an instance ("" when absent).
std::string TagValue(const Poco::JSON::Object::Ptr& instance, const std::string& key);

/// True when gpuprov made the instance: tag gpuprov=1, or (an API that drops tags) the
/// description gpuprov writes for its hostname.
bool IsManaged(const Poco::JSON::Object::Ptr& instance);

/// The id of a create answer: a bare text id, a JSON string, or a JSON object with "id"
/// (section 2, 3.1); "" when none.
std::string IdOfCreateAnswer(const std::string& body);

/// The volumes gpuprov deletes with an instance: its OS volume (`os_volume_id`, the only volume
/// gpuprov makes), else the instance's `volume_ids`; a volume the user attached is detached,
/// never deleted.
std::vector<std::string> VolumesToDelete(const Poco::JSON::Object::Ptr& instance);

/// The delete action's body: {"action":"delete","id":[id],"volume_ids":[...],
/// "delete_permanently":true}. V-SPEC PerformInstanceActionPublicDto: volume_ids is an array
/// of strings, and delete_permanently applies only "when volume IDs to delete are also
/// provided"; without them the OS volume goes to the trash (96 h, counted in the quota).
std::string DeleteActionBody(const std::string& id, const std::vector<std::string>& volume_ids);

/// What an action answer says about one instance (section 3.4): done, already gone ("Invalid
/// instance id", "Can't discontinue a discontinued instance"), not yet deletable ("Can't
/// discontinue a provisioning instance"), or another error.
enum class ActionOutcome { kDone, kGone, kNotYet, kFailed };
ActionOutcome ClassifyActionMessage(const std::string& message);

}  // namespace gpuprov::verda
