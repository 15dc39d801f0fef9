// SPDX-License-Identifier: Apache-2.0
#include "ec2_xml.h"

#include <Poco/AutoPtr.h>
#include <Poco/DOM/DOMParser.h>
#include <Poco/DOM/Document.h>
#include <Poco/DOM/Element.h>
#include <Poco/DOM/Node.h>
#include <Poco/DOM/NodeList.h>
#include <Poco/Exception.h>
#include <Poco/SAX/InputSource.h>

#include <sstream>
#include <stdexcept>

#include "credentials.h"

namespace gpuprov::aws {
namespace {

std::string LocalName(const std::string& qname) {
  size_t colon = qname.find(':');
  return colon == std::string::npos ? qname : qname.substr(colon + 1);
}

XmlNode Convert(Poco::XML::Node* node, int depth) {
  XmlNode out;
  out.name = LocalName(node->nodeName());
  if (depth > 64) return out;
  std::string text;
  for (Poco::XML::Node* c = node->firstChild(); c != nullptr; c = c->nextSibling()) {
    if (c->nodeType() == Poco::XML::Node::ELEMENT_NODE) {
      out.children.push_back(Convert(c, depth + 1));
    } else if (c->nodeType() == Poco::XML::Node::TEXT_NODE ||
               c->nodeType() == Poco::XML::Node::CDATA_SECTION_NODE) {
      text += c->nodeValue();
    }
  }
  out.text = drivers::TrimSpace(text);
  return out;
}

}  // namespace

const XmlNode* XmlNode::Child(const std::string& child) const {
  for (const auto& c : children) {
    if (c.name == child) return &c;
  }
  return nullptr;
}

const XmlNode* XmlNode::Find(const std::string& path) const {
  const XmlNode* n = this;
  size_t start = 0;
  while (n != nullptr && start <= path.size()) {
    size_t slash = path.find('/', start);
    const std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty()) n = n->Child(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return n;
}

std::string XmlNode::Text(const std::string& path) const {
  const XmlNode* n = Find(path);
  return n ? n->text : "";
}

std::vector<const XmlNode*> XmlNode::Items(const std::string& set_path) const {
  std::vector<const XmlNode*> out;
  if (const XmlNode* set = Find(set_path)) {
    for (const auto& c : set->children) {
      if (c.name == "item") out.push_back(&c);
    }
  }
  return out;
}

XmlNode ParseXml(const std::string& text) {
  try {
    Poco::XML::DOMParser parser;
    parser.setFeature(Poco::XML::XMLReader::FEATURE_NAMESPACES, false);
    std::istringstream in(text);
    Poco::XML::InputSource source(in);
    Poco::AutoPtr<Poco::XML::Document> doc = parser.parse(&source);
    Poco::XML::Element* root = doc->documentElement();
    if (root == nullptr) throw std::runtime_error("no root element");
    return Convert(root, 0);
  } catch (const Poco::Exception& e) {
    throw std::runtime_error("not an XML document (" + e.displayText() + ")");
  }
}

Ec2ErrorBody ParseErrorBody(const std::string& text) {
  Ec2ErrorBody out;
  try {
    XmlNode root = ParseXml(text);
    const XmlNode* error = root.Find("Errors/Error");
    if (error == nullptr && root.name == "Error") error = &root;
    if (error == nullptr) error = root.Child("Error");  // STS: <ErrorResponse><Error>
    if (error == nullptr) return out;
    out.code = error->Text("Code");
    out.message = error->Text("Message");
    out.request_id = root.Text("RequestID");
    if (out.request_id.empty()) out.request_id = root.Text("RequestId");
  } catch (const std::exception&) {
  }
  return out;
}

}  // namespace gpuprov::aws
