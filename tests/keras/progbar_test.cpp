// keras Progbar: Keras 2.x's exact progress text (utils/generic_utils.py), on a fixed clock.
#include <doctest/doctest.h>

#include "keras/progbar.h"

using est::keras::Progbar;
using est::keras::ProgbarOutput;

namespace {

struct Capture {
  std::string text;
  double clock = 1000.0;
  ProgbarOutput output(bool terminal) {
    return {.write = [this](const std::string& s) { text += s; },
            .is_terminal = terminal,
            .now = [this] { return clock; }};
  }
};

// 70 steps of 7 ms each after t = 1000, values as a ProgbarLogger passes them.
void run_epoch(Progbar& bar, Capture& capture) {
  for (int step = 1; step <= 70; ++step) {
    capture.clock = 1000.0 + 0.007 * step;
    bar.update(step, {{"loss", 2.2720}, {"accuracy", 0.2181}},
               step == 70 ? std::optional(true) : std::nullopt);
  }
}

}  // namespace

TEST_CASE("keras Progbar verbose 1 without a terminal prints the final bar line only") {
  Capture capture;
  Progbar bar(70, 1, capture.output(false));
  run_epoch(bar, capture);
  CHECK(capture.text ==
        "70/70 [==============================] - 0s 7ms/step - loss: 2.2720 - accuracy: "
        "0.2181\n");
}

TEST_CASE("keras Progbar verbose 2 prints one line per epoch with epoch and step times") {
  Capture capture;
  Progbar bar(70, 2, capture.output(false));
  run_epoch(bar, capture);
  CHECK(capture.text == "70/70 - 0s - loss: 2.2720 - accuracy: 0.2181 - 490ms/epoch - 7ms/step\n");
}

TEST_CASE("keras Progbar on a terminal rewrites the bar in place with an ETA") {
  Capture capture;
  Progbar bar(70, 1, capture.output(true));
  capture.clock = 1001.0;
  bar.update(1, {{"loss", 2.5}});
  std::string first = " 1/70 [..............................] - ETA: 1:09 - loss: 2.5000";
  CHECK(capture.text == "\r" + first);
  capture.clock = 1136.0;  // 135 s for 34 more steps: ETA 35 * 135/34 = 138.97 s
  bar.update(35, {{"loss", 0.0001}});
  std::string second = "35/70 [==============>...............] - ETA: 2:18 - loss: 1.0000e-04";
  CHECK(capture.text == "\r" + first + std::string(first.size(), '\b') + "\r" + second);
}

TEST_CASE("keras Progbar time units: s, ms and us per step") {
  for (auto [step_seconds, unit] :
       {std::pair{1.5, std::string("2s/step")}, std::pair{0.0004, std::string("400us/step")}}) {
    Capture capture;
    Progbar bar(2, 1, capture.output(false));
    capture.clock += step_seconds;
    bar.update(1, {});
    capture.clock += step_seconds;
    bar.update(2, {});
    CHECK(capture.text.find(unit) != std::string::npos);
  }
}
