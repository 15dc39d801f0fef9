#include "prompt.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "console.h"
#include "error.h"

namespace gpuprov {
namespace {

class TerminalPrompter : public Prompter {
 public:
  bool CanAsk() const override { return isatty(STDIN_FILENO) && isatty(STDERR_FILENO); }
  bool Confirm(const std::string& question) override {
    Console::Get().PauseStatus();
    std::cerr << question << " [y/N] " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer)) {
      std::cerr << "\n";
      return false;
    }
    return answer == "y" || answer == "Y" || answer == "yes" || answer == "YES" || answer == "Yes";
  }
};

}  // namespace

std::unique_ptr<Prompter> MakeTerminalPrompter() { return std::make_unique<TerminalPrompter>(); }

ConsentDecision DecideDownConsent(bool yes, bool can_ask) {
  if (yes) return {Consent::kProceed, "--yes"};
  if (!can_ask) return {Consent::kProceed, "not a terminal"};
  return {Consent::kAsk, ""};
}

std::optional<std::string> MaxPriceRefusal(double price_per_hour, std::optional<double> max_price) {
  if (!max_price) return std::nullopt;
  if (price_per_hour <= 0) return "price unknown, so not known to be within --max-price";
  if (price_per_hour > *max_price) return "above --max-price " + FormatPricePerHour(*max_price);
  return std::nullopt;
}

ConsentDecision DecideCreateConsent(double price_per_hour, std::optional<double> max_price,
                                    double confirm_above, bool yes, bool can_ask) {
  const std::string price = FormatPricePerHour(price_per_hour);
  if (std::optional<std::string> refused = MaxPriceRefusal(price_per_hour, max_price)) {
    return {Consent::kRefuse,
            price_per_hour > 0 ? "the offer costs " + price + ", " + *refused : *refused};
  }
  if (price_per_hour <= confirm_above) return {Consent::kProceed, ""};
  const std::string above = "the offer costs " + price + ", above confirm_above_per_hour " +
                            FormatPricePerHour(confirm_above);
  if (yes) return {Consent::kProceed, above + " (--yes)"};
  if (!can_ask) return {Consent::kProceed, above + " (not a terminal: not asked)"};
  return {Consent::kAsk, above};
}

std::string FormatPricePerHour(double price_per_hour) {
  char buf[48];
  if (price_per_hour > 0 && price_per_hour < 0.01) {
    std::snprintf(buf, sizeof buf, "$%.4f/h", price_per_hour);
  } else {
    std::snprintf(buf, sizeof buf, "$%.2f/h", price_per_hour);
  }
  return buf;
}

double ParsePricePerHour(const std::string& text, const std::string& field) {
  std::string number = text;
  if (!number.empty() && number[0] == '$') number.erase(0, 1);
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !std::isfinite(value) || value < 0) {
    throw UsageError(field + " must be a price in dollars per hour, e.g. 2.50; not '" + text + "'",
                     "give a number of 0 or more");
  }
  return value;
}

}  // namespace gpuprov
