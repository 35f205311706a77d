#pragma once
// A spin box of steps that names warm-up steps as warm-up: step -2 of a run with 2 warm-up
// steps reads "warm-up 1 of 2", step 3 reads "step 3" (step_name in core/timeline_math.h).
// Enter, the arrow keys, Page Up/Down and the wheel choose a step (step_chosen): the timeline
// page fits it, as Perfetto's or Nsight's "go to" moves the view (tester56 F1). Typing alone
// chooses nothing (no keyboard tracking: "11" is not step 1 first). The timeline page makes it
// name what the view shows (name_view): one step, or "steps 2-5" / "all measured steps".

#include <QSpinBox>

#include <cstdint>

namespace embedscope::ui {

class StepBox : public QSpinBox {
  Q_OBJECT

 public:
  /// Steps first..last (warm-up steps are negative: -warmup..-1).
  StepBox(int64_t first, int64_t last, QWidget* parent = nullptr);
  int64_t warmup_steps() const { return warmup_; }
  /// Names what the timeline shows without a signal: step `step` ("step 3"), or, with `several`
  /// non-empty, that text ("steps 2-5", "all measured steps": core/timeline_nav.h
  /// shown_steps_name) for the value `step` (the view's centre step, which the arrows and Enter go
  /// on from) until the value changes.
  void name_view(int step, const QString& several);

 signals:
  /// Enter (the text read as a step, even when unchanged), or a step up / down from the box.
  void step_chosen(int step);

 protected:
  QString textFromValue(int value) const override;
  /// Accepts what textFromValue writes, a bare number ("-2", "3") and "step 3".
  int valueFromText(const QString& text) const override;
  QValidator::State validate(QString& text, int& pos) const override;
  void keyPressEvent(QKeyEvent* e) override;

 public:
  void stepBy(int steps) override;

 private:
  int64_t warmup_ = 0;
  QString several_;  // name_view's text for several steps, shown while the value is several_value_
  int several_value_ = 0;
};

}  // namespace embedscope::ui
