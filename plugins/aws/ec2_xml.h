// SPDX-License-Identifier: Apache-2.0
//
// EC2 Query API responses (REFERENCE.md §3, §8) read with Poco XML into a small tree. Fields
// are read by element name (namespaces ignored) and unknown elements are ignored, as the
// reference advises. Lists are "...Set" elements with "item" children.
#pragma once

#include <string>
#include <vector>

namespace gpuprov::aws {

struct XmlNode {
  std::string name;  ///< local name, without namespace prefix
  std::string text;  ///< the direct text content, trimmed
  std::vector<XmlNode> children;

  /// The first child called name, or nullptr.
  const XmlNode* Child(const std::string& name) const;
  /// The node at a '/'-separated path of child names ("instanceState/name"), or nullptr.
  const XmlNode* Find(const std::string& path) const;
  /// Text at a path; "" when absent.
  std::string Text(const std::string& path) const;
  /// The "item" children of the child at `set_path` ("instancesSet"); empty when absent.
  std::vector<const XmlNode*> Items(const std::string& set_path) const;
};

/// Parses an XML document into its root element; throws std::runtime_error naming the problem.
XmlNode ParseXml(const std::string& text);

/// The first error of an EC2 error body (Response/Errors/Error/{Code,Message}, RequestID).
struct Ec2ErrorBody {
  std::string code;
  std::string message;
  std::string request_id;
};
/// Empty code when the text is not an EC2 error document.
Ec2ErrorBody ParseErrorBody(const std::string& text);

}  // namespace gpuprov::aws
