#include "console.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "status_display.h"

extern char** environ;

namespace gpuprov {
namespace {

bool LooksSecret(std::string_view name) {
  static const char* const kMarkers[] = {"TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL"};
  std::string upper(name);
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  for (const char* m : kMarkers) {
    if (upper.find(m) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Console& Console::Get() {
  static Console console;
  return console;
}

Console::Console() {
  color_ = isatty(STDERR_FILENO) && std::getenv("NO_COLOR") == nullptr;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string_view name(*e, eq - *e);
    std::string value(eq + 1);
    if (LooksSecret(name) && value.size() >= 8) secrets_.push_back(value);
  }
  display_ = std::make_unique<LineStatus>(
      std::cerr, [] { return StatusDisplay::Clock::now(); }, color_);
}

Console::~Console() = default;

void Console::set_display(std::unique_ptr<StatusDisplay> display) {
  display_ = std::move(display);
}

void Console::PauseStatus() { display_->Pause(); }

void Console::FinishStatus(bool ok) { display_->Finish(ok); }

void Console::FailStatus(std::string_view message) {
  display_->Failed(Redact(message));
  display_->Finish(false);
}

void Console::AddSecret(std::string value) {
  if (value.size() >= 8) secrets_.push_back(std::move(value));
}

std::string Console::Redact(std::string_view text) const {
  std::string out(text);
  for (const std::string& s : secrets_) {
    for (size_t pos = out.find(s); pos != std::string::npos; pos = out.find(s, pos)) {
      out.replace(pos, s.size(), "[redacted]");
      pos += 10;
    }
  }
  return out;
}

void Console::Emit(std::string_view prefix, std::string_view msg, const char* color_code) {
  const std::lock_guard<std::recursive_mutex> hold(mutex_);
  const std::string line = Redact(msg);
  if (color_ && color_code != nullptr) {
    display_->Line(std::string(color_code) + std::string(prefix) + "\033[0m" + line);
  } else {
    display_->Line(std::string(prefix) + line);
  }
}

void Console::Debug(std::string_view msg) {
  if (verbose_) Emit("debug: ", msg, "\033[2m");
}
void Console::Info(std::string_view msg) { Emit("  ", msg, nullptr); }
void Console::Step(std::string_view msg) { Step(phase_.empty() ? "step" : phase_, msg); }
void Console::Step(std::string_view phase, std::string_view msg) {
  const std::lock_guard<std::recursive_mutex> hold(mutex_);
  phase_ = phase;
  display_->Phase(phase, Redact(msg));
}
void Console::Note(std::string_view msg) { Emit("note: ", msg, "\033[1;36m"); }
void Console::Warning(std::string_view msg) { Emit("warning: ", msg, "\033[1;33m"); }
void Console::ErrorLine(std::string_view msg, std::string_view hint) {
  Emit("error: ", msg, "\033[1;31m");
  if (!hint.empty()) Emit("hint: ", hint, "\033[1m");
}
void Console::Progress(std::string_view msg, std::chrono::seconds elapsed) {
  const std::lock_guard<std::recursive_mutex> hold(mutex_);
  display_->Waiting(Redact(msg), elapsed);
}

void Console::Result(std::string_view text) {
  display_->Finish(true);  // the status line (and its open phase) before the result
  std::cout << Redact(text);
  std::cout.flush();
}

}  // namespace gpuprov
