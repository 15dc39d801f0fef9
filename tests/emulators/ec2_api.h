// SPDX-License-Identifier: Apache-2.0
//
// What the EC2 emulator (ec2_api.cc) accepts, for tests that hold it to the EC2 API model.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpuprov::emulator {

/// One request parameter of an EC2 Query API action as it is sent: its name with every list
/// index written N ("Filter.N.Value.N", "TagSpecification.N.Tag.N.Key"), and its model type:
/// 's' string, 'i' integer/long, 'b' boolean, 'd' double/float, 't' timestamp, 'B' blob.
struct Ec2Param {
  std::string pattern;
  char type;
};

/// One action the emulator serves: the parameters it takes (any other is UnknownParameter)
/// and the members the model marks required (MissingParameter when none of their keys is sent).
struct Ec2ActionShape {
  std::vector<Ec2Param> params;
  std::vector<std::string> required;
};

/// Every action the EC2 emulator serves, by name, as transcribed from the EC2 API model
/// (botocore's data/ec2/2016-11-15/service-2.json, see ec2_api.cc).
const std::map<std::string, Ec2ActionShape>& Ec2ActionShapes();

/// "Filter.1.Value.2" -> "Filter.N.Value.N": the pattern of a sent parameter name.
std::string Ec2ParamPattern(const std::string& name);

}  // namespace gpuprov::emulator
