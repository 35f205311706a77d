#include "timeline/step_box.h"

#include <QKeyEvent>
#include <QRegularExpression>
#include <QSignalBlocker>

#include <algorithm>

#include "core/timeline_math.h"

namespace embedscope::ui {

StepBox::StepBox(int64_t first, int64_t last, QWidget* parent) : QSpinBox(parent), warmup_(std::max<int64_t>(0, -first)) {
  setRange(static_cast<int>(first), static_cast<int>(std::max(first, last)));
  // room for the longest name ("warm-up 10 of 10", "all measured steps")
  setMinimumWidth(std::max(fontMetrics().horizontalAdvance(textFromValue(minimum())),
                           fontMetrics().horizontalAdvance("all measured steps")) + 40);
  setKeyboardTracking(false);
}

void StepBox::keyPressEvent(QKeyEvent* e) {
  QSpinBox::keyPressEvent(e);  // Enter interprets the text first (valueFromText)
  if (e->key() == Qt::Key_Return || e->key() == Qt::Key_Enter) emit step_chosen(value());
}

void StepBox::stepBy(int steps) {
  QSpinBox::stepBy(steps);
  emit step_chosen(value());
}

void StepBox::name_view(int step, const QString& several) {
  const QSignalBlocker quiet(this);
  several_ = several;
  several_value_ = step;
  setValue(step);  // the text follows even when the value does not change
}

QString StepBox::textFromValue(int value) const {
  if (!several_.isEmpty() && value == several_value_) return several_;
  return QString::fromStdString(step_name(value, warmup_));
}

int StepBox::valueFromText(const QString& text) const {
  static const QRegularExpression warm(R"(^\s*warm-?up\s+(\d+)(\s+of\s+\d+)?\s*$)", QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression step(R"(^\s*(step\s+)?(-?\d+)\s*$)", QRegularExpression::CaseInsensitiveOption);
  if (!several_.isEmpty() && text.trimmed() == several_) return several_value_;
  if (const auto m = warm.match(text); m.hasMatch()) return m.captured(1).toInt() - static_cast<int>(warmup_) - 1;
  if (const auto m = step.match(text); m.hasMatch()) return m.captured(2).toInt();
  return value();
}

QValidator::State StepBox::validate(QString& text, int&) const {
  static const QRegularExpression full(R"(^\s*(warm-?up\s+\d+(\s+of\s+\d+)?|(step\s+)?-?\d+|warm-up \(step -?\d+\))\s*$)",
                                       QRegularExpression::CaseInsensitiveOption);
  if (full.match(text).hasMatch() || (!several_.isEmpty() && text.trimmed() == several_)) return QValidator::Acceptable;
  return QValidator::Intermediate;
}

}  // namespace embedscope::ui
