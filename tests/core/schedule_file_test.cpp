// core::loadSchedule: the one place that picks the schedule parser (by explicit format, the
// file's extension, else its content), with overrides and errors naming file:line:col.
#include "pipestudio/core/io/schedule_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// 1F1B on 2 devices with 4 micro-batches, the schedule every case reads in one form or the other.
Schedule oneFOneB() {
  return generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{2, 4, 0}).value();
}

const std::string& pipeText() {
  static const std::string text = printDsl(oneFOneB());
  return text;
}

const std::string& csvText() {
  static const std::string text = writePytorchCsv(oneFOneB()).value();
  return text;
}

struct FormatCase {
  const char* label;
  std::optional<ScheduleFormat> explicitFormat;
  const char* path;
  bool csvContent;
  ScheduleFormat expected;
};

class ScheduleFormatResolution : public ::testing::TestWithParam<FormatCase> {};

TEST_P(ScheduleFormatResolution, PicksTheFormatAndParsesWithIt) {
  const FormatCase& c = GetParam();
  ScheduleLoadOptions o;
  o.format = c.explicitFormat;
  o.path = c.path;
  const std::string& text = c.csvContent ? csvText() : pipeText();
  EXPECT_EQ(resolveScheduleFormat(text, o), c.expected);
  auto s = loadSchedule(text, o);
  // The text parses only when the format picked is the text's own.
  EXPECT_EQ(s.ok(), c.csvContent == (c.expected == ScheduleFormat::Csv)) << c.label;
  if (s.ok()) {
    EXPECT_EQ(s->opCount(), oneFOneB().opCount()) << c.label;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScheduleFormatResolution,
    ::testing::Values(
        FormatCase{"pipe_by_extension", std::nullopt, "a.pipe", false, ScheduleFormat::Pipe},
        FormatCase{"csv_by_extension", std::nullopt, "a.csv", true, ScheduleFormat::Csv},
        FormatCase{"csv_extension_any_case", std::nullopt, "A.CSV", true, ScheduleFormat::Csv},
        FormatCase{"csv_on_stdin_by_content", std::nullopt, "-", true, ScheduleFormat::Csv},
        FormatCase{"pipe_on_stdin_by_content", std::nullopt, "-", false, ScheduleFormat::Pipe},
        FormatCase{"csv_other_name_by_content", std::nullopt, "sched.txt", true, ScheduleFormat::Csv},
        FormatCase{"explicit_beats_extension", ScheduleFormat::Csv, "a.pipe", true, ScheduleFormat::Csv},
        FormatCase{"explicit_pipe_on_csv_text", ScheduleFormat::Pipe, "a.csv", true, ScheduleFormat::Pipe}),
    [](const auto& info) { return std::string(info.param.label); });

TEST(ScheduleFile, FormatNamesRoundTrip) {
  for (ScheduleFormat f : {ScheduleFormat::Pipe, ScheduleFormat::Csv})
    EXPECT_EQ(scheduleFormatFromName(scheduleFormatName(f)), f);
  EXPECT_FALSE(scheduleFormatFromName("json"));
  EXPECT_FALSE(scheduleFormatFromPath("-"));
  EXPECT_FALSE(scheduleFormatFromPath("schedule.json"));
}

TEST(ScheduleFile, CsvErrorsNameFileLineAndColumn) {
  ScheduleLoadOptions o;
  o.path = "bad.csv";
  auto s = loadSchedule("0F0,0X0\n", o);
  ASSERT_FALSE(s.ok());
  const Diagnostic& d = s.errors().front();
  EXPECT_EQ(d.location.file, "bad.csv");
  EXPECT_EQ(d.location.line, 1);
  EXPECT_EQ(d.location.column, 5);
}

TEST(ScheduleFile, PipeErrorsUseTheGivenNameAndStdinIsNamed) {
  ScheduleLoadOptions o;
  o.path = "-";
  EXPECT_EQ(scheduleSourceName(o), "<stdin>");
  o.format = ScheduleFormat::Pipe;
  auto s = loadSchedule("devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 X0\n", o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.errors().front().location.file, "<stdin>");
  EXPECT_EQ(s.errors().front().location.line, 4);
  o.name = "shown.pipe";
  auto named = loadSchedule("devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 X0\n", o);
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.errors().front().location.file, "shown.pipe");
}

TEST(ScheduleFile, OverridesApplyToPipePrograms) {
  ScheduleLoadOptions o;
  o.path = "p.pipe";
  const char* program =
      "let chunks = 2\ndevices 2\nstages devices * chunks\nmicrobatches chunks + 1\nplacement interleaved\n";
  auto plain = loadSchedule(program, o);
  ASSERT_TRUE(plain.ok()) << formatDiagnostics(plain.errors());
  EXPECT_EQ(plain->pipeline.microbatches, 3);
  o.overrides = {"chunks=3"};
  auto s = loadSchedule(program, o);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  EXPECT_EQ(s->pipeline.stages, 6);
  EXPECT_EQ(s->pipeline.microbatches, 4);

  o.overrides = {"no equals sign"};
  auto bad = loadSchedule(program, o);
  ASSERT_FALSE(bad.ok());
  ASSERT_EQ(bad.errors().size(), 1u);
  EXPECT_EQ(bad.errors().front().code, kScheduleOverrideCode);
}

TEST(ScheduleFile, OverridesForACsvAreRefusedNotIgnored) {
  ScheduleLoadOptions o;
  o.path = "a.csv";
  o.overrides = {"microbatches=6"};
  auto s = loadSchedule(csvText(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.errors().front().code, kScheduleOverrideCode);
}

TEST(ScheduleFile, CsvMicrobatchesAndCellsAreHonoured) {
  ScheduleLoadOptions o;
  o.format = ScheduleFormat::Csv;
  o.csvMicrobatches = 4;
  CsvStepLocations cells;
  o.cells = &cells;
  o.name = "r.csv";
  auto s = loadSchedule(csvText(), o);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  EXPECT_EQ(s->pipeline.microbatches, 4);
  ASSERT_EQ(cells.size(), 2u);
  ASSERT_FALSE(cells[1].empty());
  EXPECT_EQ(cells[1][0].file, "r.csv");
  EXPECT_EQ(cells[1][0].line, 2);
}

TEST(ScheduleFile, LocatesValidatorDiagnosticsAtCsvCells) {
  // Rank 1 lacks its last backward: the validator names the op, the locator its cell or row.
  std::string text = csvText();
  const size_t lastComma = text.rfind(',');
  text = text.substr(0, lastComma) + "\n";
  ScheduleLoadOptions o;
  o.path = "cut.csv";
  CsvStepLocations cells;
  o.cells = &cells;
  auto s = loadSchedule(text, o);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  ValidationReport report = validateSchedule(*s);
  ASSERT_FALSE(report.valid());
  locateScheduleDiagnostics(report.diagnostics, "cut.csv", ScheduleFormat::Csv, cells);
  for (const Diagnostic& d : report.diagnostics) {
    EXPECT_EQ(d.location.file, "cut.csv") << d.message;
    if (!d.related.empty() && d.related.front().device >= 0) {
      EXPECT_GT(d.location.line, 0) << d.message;
    }
  }
}

TEST(ScheduleFile, LoadsFilesAndNamesAnUnreadableOne) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ps_schedule_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "s.csv").string();
  std::ofstream(csv) << csvText();
  ScheduleLoadOptions o;
  o.path = csv;
  auto s = loadScheduleFile(o);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  EXPECT_EQ(s->opCount(), oneFOneB().opCount());
  o.path = (dir / "missing.pipe").string();
  auto missing = loadScheduleFile(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "io.read");
  EXPECT_NE(missing.error().message.find("missing.pipe"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
