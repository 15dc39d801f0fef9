// Console output of the gpuprov CLI. Results go to stdout; progress, notes and logs go to
// stderr (docs/design.md §6). Every line that leaves through here is redacted: the values of
// secret-looking environment variables (names containing TOKEN, SECRET, PASSWORD, KEY, with
// values of 8 characters or more) are replaced by "[redacted]".
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace gpuprov {

class StatusDisplay;

class Console {
 public:
  /// The process-wide console.
  static Console& Get();

  void set_verbose(bool verbose) { verbose_ = verbose; }
  bool verbose() const { return verbose_; }
  /// Colour only when stderr is a terminal and NO_COLOR is unset.
  bool color() const { return color_; }

  void Debug(std::string_view msg);     // only with -v
  void Info(std::string_view msg);      // "  msg"
  void Step(std::string_view msg);      // "==> msg": a phase of the flow
  /// A phase of the flow with its key ("create", "ssh", ...) for --output ndjson events.
  void Step(std::string_view phase, std::string_view msg);
  void Note(std::string_view msg);      // "note: msg"
  void Warning(std::string_view msg);   // "warning: msg"
  void ErrorLine(std::string_view msg, std::string_view hint);  // "error: msg" + "hint: ..."
  /// A wait with its elapsed time: "  waiting for SSH on 127.77.0.5:22 ... 12s" on a pipe (at
  /// most one line per wait every 30 s), the status line on a terminal (status_display.h).
  void Progress(std::string_view msg, std::chrono::seconds elapsed);

  /// Where phases, waits and stderr lines go; by default a LineStatus on stderr.
  void set_display(std::unique_ptr<StatusDisplay> display);
  /// Removes the terminal status line before a question is asked.
  void PauseStatus();
  /// The command ends: closes the open phase (\a ok false: it failed).
  void FinishStatus(bool ok);
  /// The command failed with \a message: reported to the display (an ndjson "error" event),
  /// then the open phase is closed as failed.
  void FailStatus(std::string_view message);

  /// Results: stdout, unredacted on purpose only for data the user asked for.
  void Result(std::string_view text);

  /// Replaces every known secret value in text.
  std::string Redact(std::string_view text) const;
  /// Adds a value to redact (e.g. a token read from a file).
  void AddSecret(std::string value);

 private:
  Console();
  ~Console();
  void Emit(std::string_view prefix, std::string_view msg, const char* color_code);

  bool verbose_ = false;
  bool color_ = false;
  std::vector<std::string> secrets_;
  std::string phase_;  // the key of the last Step
  std::unique_ptr<StatusDisplay> display_;
  /// Lines, phases and waits may come from several threads (provision asks the candidate
  /// clouds' drivers for offers side by side, and their logs come through here).
  std::recursive_mutex mutex_;
};

}  // namespace gpuprov
