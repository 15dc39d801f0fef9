#include "gpu_request.h"

#include <cctype>

#include "error.h"

namespace gpuprov {
namespace {

constexpr std::string_view kExamples = "write e.g. L4:1 or H100-80GB:8";

bool IsAsciiAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Error Bad(std::string_view field_name, std::string_view text, std::string_view why) {
  std::string message(field_name);
  message += ": \"";
  message += text;
  message += "\" ";
  message += why;
  message += "; ";
  message += kExamples;
  return UsageError(std::move(message));
}

}  // namespace

GpuRequest ParseGpuRequest(std::string_view text, std::string_view field_name) {
  const std::string_view trimmed = TrimBlanks(text);
  const std::size_t colon = trimmed.find(':');
  if (colon == std::string_view::npos || colon == 0 ||
      trimmed.find(':', colon + 1) != std::string_view::npos) {
    throw Bad(field_name, text, "is not TYPE:COUNT");
  }
  const std::string_view type = trimmed.substr(0, colon);
  const std::string_view count_text = trimmed.substr(colon + 1);

  if (!IsAsciiAlnum(type.front()) || type.size() > kMaxGpuTypeLength) {
    throw Bad(field_name, text,
              "has an invalid GPU type: it must start with a letter or digit and have at most " +
                  std::to_string(kMaxGpuTypeLength) + " characters");
  }
  for (char c : type) {
    if (!IsAsciiAlnum(c) && c != '-') {
      throw Bad(field_name, text,
                "has an invalid GPU type: only letters, digits and '-' are allowed");
    }
  }

  // A count is decimal digits, optionally with a leading '-' so that "-1" gets the range
  // message rather than the format message.
  std::string_view digits = count_text;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  if (digits.empty()) throw Bad(field_name, text, "is not TYPE:COUNT");
  for (char c : digits) {
    if (!IsAsciiDigit(c)) throw Bad(field_name, text, "is not TYPE:COUNT");
  }
  // Leading zeros are skipped; more than 2 significant digits is always out of range.
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  int count = kMaxGpuCount + 1;
  if (digits.size() <= 2) {
    count = 0;
    for (char c : digits) count = count * 10 + (c - '0');
  }
  if (negative || count < 1 || count > kMaxGpuCount) {
    throw Bad(field_name, text,
              "has an invalid GPU count: it must be 1 to " + std::to_string(kMaxGpuCount));
  }

  GpuRequest request;
  request.type.reserve(type.size());
  for (char c : type) {
    request.type += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  request.count = count;
  return request;
}

std::string ToString(const GpuRequest& request) {
  return request.type + ":" + std::to_string(request.count);
}

}  // namespace gpuprov
