// SPDX-License-Identifier: Apache-2.0
//
// The driver descriptor check (core/driver_host.cc ValidateDescriptor) on descriptors with
// random contents, as a driver .so could hand them over: every integer field (struct_size,
// magic, ABI versions, capabilities, config key count, each config key's struct_size and type)
// is random; every pointer is NULL or points at a valid object the input also fills (C strings,
// the function table, the config key array). Each struct lives in its own heap block of
// exactly the size it declares (at most twice the host's), so a read past what the driver
// declared is an ASan report. The host must never crash: it fills DriverInfo or its problem.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "driver_host.h"
#include "gpuprov/driver_abi.h"

namespace {

// Never called: ValidateDescriptor only looks at whether a function pointer is set.
void NotCalled() { __builtin_trap(); }

/// A heap block of exactly \a size bytes filled from the input, first field struct_size.
std::unique_ptr<uint8_t[]> Block(FuzzedDataProvider& in, uint32_t size) {
  auto block = std::make_unique<uint8_t[]>(size);
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(size);
  if (!bytes.empty()) std::memcpy(block.get(), bytes.data(), bytes.size());
  if (size >= sizeof(uint32_t)) std::memcpy(block.get(), &size, sizeof(size));
  return block;
}

/// Sets the pointer member at \a offset, when it lies inside the declared \a size.
void SetPointer(uint8_t* block, uint32_t size, size_t offset, const void* value) {
  if (offset + sizeof(value) <= size) std::memcpy(block + offset, &value, sizeof(value));
}

/// A struct size up to twice \a host_size; at least its own 4 bytes, which the host always reads.
uint32_t StructSize(FuzzedDataProvider& in, size_t host_size) {
  return in.ConsumeIntegralInRange<uint32_t>(sizeof(uint32_t), static_cast<uint32_t>(2 * host_size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<std::string> strings;  // storage for every C string handed over
  strings.reserve(600);
  auto c_string = [&](void) -> const char* {
    if (in.ConsumeBool()) return nullptr;
    strings.push_back(in.ConsumeRandomLengthString(80));
    return strings.back().c_str();
  };

  // The function table: random bytes, then each function pointer set or NULL.
  const uint32_t vtable_size = StructSize(in, sizeof(gpuprov_drv_vtable));
  auto vtable = Block(in, vtable_size);
  const size_t first_fn = offsetof(gpuprov_drv_vtable, init);
  for (size_t off = first_fn; off + sizeof(void*) <= sizeof(gpuprov_drv_vtable);
       off += sizeof(void*)) {
    SetPointer(vtable.get(), vtable_size, off,
               in.ConsumeBool() ? reinterpret_cast<const void*>(&NotCalled) : nullptr);
  }

  // The config keys: count random (the host caps it), each key its own block.
  const size_t key_count = in.ConsumeIntegralInRange<size_t>(0, 300);
  std::vector<std::unique_ptr<uint8_t[]>> key_blocks;
  std::vector<const gpuprov_type_config_key*> keys;
  keys.reserve(key_count);  // members point into it: no reallocation
  for (size_t i = 0; i < key_count && in.remaining_bytes() > 0; ++i) {
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
      keys.push_back(nullptr);
      continue;
    }
    const uint32_t key_size = StructSize(in, sizeof(gpuprov_type_config_key));
    auto key = Block(in, key_size);
    SetPointer(key.get(), key_size, offsetof(gpuprov_type_config_key, name), c_string());
    SetPointer(key.get(), key_size, offsetof(gpuprov_type_config_key, help), c_string());
    // ABI 1.3: a former name (a string or NULL) and a table's members (the keys made so far,
    // which are valid blocks or NULL, or NULL).
    SetPointer(key.get(), key_size, offsetof(gpuprov_type_config_key, replaced_by),
               in.ConsumeBool() ? c_string() : nullptr);
    SetPointer(key.get(), key_size, offsetof(gpuprov_type_config_key, members),
               in.ConsumeBool() && !keys.empty() ? static_cast<const void*>(keys.data()) : nullptr);
    if (offsetof(gpuprov_type_config_key, member_count) + sizeof(size_t) <= key_size) {
      const size_t members =
          keys.empty() ? 0 : in.ConsumeIntegralInRange<size_t>(0, keys.size());
      std::memcpy(key.get() + offsetof(gpuprov_type_config_key, member_count), &members,
                  sizeof(members));
    }
    keys.push_back(reinterpret_cast<const gpuprov_type_config_key*>(key.get()));
    key_blocks.push_back(std::move(key));
  }
  // The array holds 300 entries, NULL past the keys given: a count the host accepts (at most
  // 256), even one half-written by a descriptor that ends inside config_key_count, stays inside
  // it. Larger counts must be refused before any read.
  const size_t declared_count = key_count > 256 ? key_count : keys.size();
  auto key_array = std::make_unique<const gpuprov_type_config_key*[]>(300);
  std::copy(keys.begin(), keys.end(), key_array.get());

  // The descriptor: random bytes; usually the right magic and major so the check goes deep.
  const uint32_t descriptor_size = StructSize(in, sizeof(gpuprov_type_driver_descriptor));
  auto descriptor = Block(in, descriptor_size);
  auto* d = descriptor.get();
  auto set_u16 = [&](size_t off, uint16_t v) {
    if (off + sizeof(v) <= descriptor_size) std::memcpy(d + off, &v, sizeof(v));
  };
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0 &&
      offsetof(gpuprov_type_driver_descriptor, magic) + 4 <= descriptor_size) {
    const uint32_t magic = GPUPROV_DRIVER_MAGIC;
    std::memcpy(d + offsetof(gpuprov_type_driver_descriptor, magic), &magic, sizeof(magic));
  }
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0) {
    set_u16(offsetof(gpuprov_type_driver_descriptor, abi_major), GPUPROV_ABI_VERSION_MAJOR);
    set_u16(offsetof(gpuprov_type_driver_descriptor, abi_minor_required),
            in.ConsumeIntegralInRange<uint16_t>(0, GPUPROV_ABI_VERSION_MINOR + 1));
  }
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, name), c_string());
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, version), c_string());
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, description), c_string());
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, vtable),
             in.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : vtable.get());
  const bool has_keys = in.ConsumeBool();
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, config_keys),
             has_keys ? key_array.get() : nullptr);
  const size_t count_offset = offsetof(gpuprov_type_driver_descriptor, config_key_count);
  if (count_offset + sizeof(size_t) <= descriptor_size) {
    const size_t count = has_keys ? declared_count : in.ConsumeIntegral<size_t>() % 300;
    std::memcpy(d + count_offset, &count, sizeof(count));
  }
  SetPointer(d, descriptor_size, offsetof(gpuprov_type_driver_descriptor, node_address),
             in.ConsumeBool() ? c_string() : nullptr);

  gpuprov::DriverInfo info;
  gpuprov_drv_vtable copy{};
  const gpuprov_drv_vtable* result = gpuprov::ValidateDescriptor(
      reinterpret_cast<const gpuprov_type_driver_descriptor*>(d), &info, &copy);
  // A usable driver has a name and its three required functions; a refused one says why.
  if (result != nullptr && (info.name.empty() || !copy.init || !copy.destroy || !copy.last_error)) {
    __builtin_trap();
  }
  if (result == nullptr && info.problem.empty()) __builtin_trap();
  (void)gpuprov::CapabilitiesToString(info.capabilities);
  return 0;
}
