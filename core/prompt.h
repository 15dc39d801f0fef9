// Questions on the terminal (issue 16, item 7). gpuprov asks only when stdin and stderr are both
// terminals; a script never waits on a question. The decisions are pure functions, so each rule
// has a unit test; the asking is behind Prompter, with a fake for tests.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace gpuprov {

class Prompter {
 public:
  virtual ~Prompter() = default;
  /// true when a question can be asked (stdin and stderr are terminals).
  virtual bool CanAsk() const = 0;
  /// Asks "\a question [y/N] "; true for y or yes (any case). Only called when CanAsk().
  virtual bool Confirm(const std::string& question) = 0;
};

/// Asks on stderr and reads the answer from stdin.
std::unique_ptr<Prompter> MakeTerminalPrompter();

enum class Consent { kProceed, kAsk, kRefuse };

struct ConsentDecision {
  Consent consent = Consent::kProceed;
  std::string reason;  // why, in words for the user (empty for a plain proceed)
};

/// `gpuprov down`: asks on a terminal unless --yes.
ConsentDecision DecideDownConsent(bool yes, bool can_ask);

/// The default of [defaults] confirm_above_per_hour: provision asks before making a VM that
/// costs more per hour.
inline constexpr double kDefaultConfirmAbovePerHour = 5.0;

/// Why --max-price \a max_price refuses an offer of \a price_per_hour (0 or less: the driver
/// does not know it): "above --max-price $2.00/h", or "price unknown, so not known to be within
/// --max-price" (an unknown price cannot be shown to be within a maximum); nullopt when it may
/// be made (no maximum, or a known price at most the maximum). The one rule of both paths: the
/// single cloud's DecideCreateConsent and the candidates' SkipAbovePrice.
std::optional<std::string> MaxPriceRefusal(double price_per_hour, std::optional<double> max_price);

/// `gpuprov provision` before creating a VM that costs \a price_per_hour (0: unknown):
/// refused by \a max_price (--max-price) as MaxPriceRefusal says, else asked above
/// \a confirm_above on a terminal unless --yes; never asked without a terminal.
ConsentDecision DecideCreateConsent(double price_per_hour, std::optional<double> max_price,
                                    double confirm_above, bool yes, bool can_ask);

/// "$1.23/h"; "$0.0025/h" below a cent.
std::string FormatPricePerHour(double price_per_hour);

/// Parses a price in dollars per hour ("2.5", "$2.50"), naming \a field in the UsageError when
/// it is not a non-negative number.
double ParsePricePerHour(const std::string& text, const std::string& field);

}  // namespace gpuprov
