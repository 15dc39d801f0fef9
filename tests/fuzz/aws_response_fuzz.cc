// SPDX-License-Identifier: Apache-2.0
//
// The AWS driver's reading of EC2 Query API answers: XML into the tree (plugins/aws/ec2_xml.cc),
// the error body, and the driver's readers of instances and security groups (tags, managed,
// gone, open ports), which live in the driver's translation unit (anonymous namespace): this
// target compiles that source so it calls them as they are, without a network.
#include "../../plugins/aws/aws_driver.cc"  // NOLINT(bugprone-suspicious-include)

#include "driver_fuzz.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = gpuprov::fuzz;
  namespace a = gpuprov::aws;
  const std::string text = f::Text(data, size);
  f::Try([&] {
    a::Ec2ErrorBody e = a::ParseErrorBody(text);
    (void)a::StatusOfCode(400, e.code);
  });
  f::Try([&] {
    a::XmlNode root = a::ParseXml(text);
    std::vector<const a::XmlNode*> instances;
    for (const a::XmlNode* r : root.Items("reservationSet")) {
      for (const a::XmlNode* i : r->Items("instancesSet")) instances.push_back(i);
    }
    for (const a::XmlNode* i : root.Items("instancesSet")) instances.push_back(i);
    for (const a::XmlNode* i : instances) {
      (void)a::TagsOf(*i);
      (void)a::Managed(*i);
      (void)a::Gone(*i);
      (void)a::StateOf(i->Text("instanceState/name"));
    }
    for (const a::XmlNode* g : root.Items("securityGroupInfo")) {
      (void)a::PortOpen(g, 22);
      (void)a::PortOpen(g, 6443);
    }
  });
  return 0;
}
