// recordMeasuredRun / predictionFor: a real run stored beside its prediction, linked both ways.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "session_test_util.h"

namespace ps::sessions {
namespace {

using core::OpKind;
using test::op;

const char* kPipe = "pipeline devices=2 stages=2 microbatches=1\ndevice 0: F0.0 B0.0\ndevice 1: F1.0 B1.0\n";

core::Timeline twoDevices(const char* label, std::vector<core::TimelineOp> ops,
                          core::TimelineSource source = core::TimelineSource::Simulated) {
  core::Timeline t;
  t.source = source;
  t.devices = 2;
  t.label = label;
  t.ops = std::move(ops);
  t.metrics = core::computeMetrics(t);
  return t;
}

core::Timeline predictedTimeline() {
  return twoDevices("predicted", {op(0, OpKind::F, 0, 0, 0, 1, 0), op(0, OpKind::B, 0, 0, 4, 6, 1),
                                  op(1, OpKind::F, 1, 0, 1, 2, 0), op(1, OpKind::B, 1, 0, 2, 4, 1)});
}

core::Timeline measuredTimeline() {
  return twoDevices("measured",
                    {op(0, OpKind::F, 0, 0, 0, 1.5, 0), op(0, OpKind::B, 0, 0, 5, 7.5, 1),
                     op(1, OpKind::F, 1, 0, 1.6, 2.8, 0), op(1, OpKind::B, 1, 0, 2.8, 4.9, 1)},
                    core::TimelineSource::Measured);
}

MeasuredRunRecording request() {
  MeasuredRunRecording r;
  r.scheduleName = "tiny";
  r.pipeText = kPipe;
  r.profileName = "analytic gpt";
  r.profileJson = R"({"name":"analytic gpt","layers":[]})";
  r.profileSource = ProfileSource::Analytic;
  r.predicted = predictedTimeline();
  r.measured = measuredTimeline();
  r.target = "cpu";
  r.model = "mlp:layers=4,hidden=64";
  r.configJson = R"({"iterations":1,"microbatch_size":2})";
  return r;
}

nlohmann::json configOf(const SessionStore& store, Id run) {
  auto r = store.run(run);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? nlohmann::json::parse(r->configJson) : nlohmann::json();
}

TEST(MeasuredRun, StoresPredictionAndMeasurementLinkedBothWays) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store) << store.error().message;
  auto rec = recordMeasuredRun(*store, request());
  ASSERT_TRUE(rec) << rec.error().message;
  ASSERT_TRUE(rec->predictedRunId);
  ASSERT_TRUE(rec->profileId);
  EXPECT_NE(rec->measuredRunId, *rec->predictedRunId);
  EXPECT_TRUE(rec->newScheduleVersion);
  EXPECT_TRUE(rec->newProfileVersion);

  auto measured = store->run(rec->measuredRunId);
  ASSERT_TRUE(measured);
  EXPECT_EQ(measured->source, core::TimelineSource::Measured);
  EXPECT_EQ(measured->summary.status, ps::core::RunState::Succeeded);
  EXPECT_EQ(measured->summary.target, "cpu");
  EXPECT_EQ(measured->summary.devices, 2);
  EXPECT_EQ(measured->summary.profileId, rec->profileId);
  EXPECT_DOUBLE_EQ(measured->summary.makespan, 7.5);
  auto predicted = store->run(*rec->predictedRunId);
  ASSERT_TRUE(predicted);
  EXPECT_EQ(predicted->source, core::TimelineSource::Simulated);
  EXPECT_EQ(predicted->summary.target, "simulator");
  EXPECT_EQ(predicted->summary.profileId, rec->profileId);
  EXPECT_EQ(predicted->summary.scheduleId, measured->summary.scheduleId);
  EXPECT_DOUBLE_EQ(predicted->summary.makespan, 6.0);

  auto mc = configOf(*store, rec->measuredRunId);
  EXPECT_EQ(mc["predicted_run"], *rec->predictedRunId);
  EXPECT_EQ(mc["role"], "measured");
  EXPECT_EQ(mc["iterations"], 1);  // the caller's options are kept
  auto pc = configOf(*store, *rec->predictedRunId);
  EXPECT_EQ(pc["measured_run"], rec->measuredRunId);
  EXPECT_EQ(pc["role"], "predicted");

  auto link = predictionFor(*store, rec->measuredRunId);
  ASSERT_TRUE(link) << link.error().message;
  EXPECT_EQ(link->predictedRunId, *rec->predictedRunId);
  EXPECT_EQ(link->measuredRunId, rec->measuredRunId);
  EXPECT_EQ(link->profileId, rec->profileId);
  EXPECT_EQ(link->scheduleId, rec->scheduleId);
  auto back = measurementFor(*store, *rec->predictedRunId);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->measuredRunId, rec->measuredRunId);

  // The timelines come back as stored.
  auto mt = store->loadTimeline(rec->measuredRunId);
  ASSERT_TRUE(mt);
  EXPECT_EQ(mt->ops.size(), 4u);
  EXPECT_DOUBLE_EQ(mt->ops.back().end, 4.9);
  auto pt = store->loadTimeline(link->predictedRunId);
  ASSERT_TRUE(pt);
  EXPECT_EQ(pt->source, core::TimelineSource::Simulated);
  EXPECT_DOUBLE_EQ(pt->metrics.makespan, 6.0);

  // The profile the prediction used is the one stored.
  auto profile = store->profile(*link->profileId);
  ASSERT_TRUE(profile);
  EXPECT_EQ(profile->json, request().profileJson);
  EXPECT_EQ(profile->info.source, ProfileSource::Analytic);
}

TEST(MeasuredRun, SecondRunOfSameScheduleAndProfileReusesThem) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto a = recordMeasuredRun(*store, request());
  auto b = recordMeasuredRun(*store, request());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->scheduleId, b->scheduleId);
  EXPECT_EQ(a->profileId, b->profileId);
  EXPECT_FALSE(b->newScheduleVersion);
  EXPECT_FALSE(b->newProfileVersion);
  // Each measured run finds its own prediction.
  EXPECT_EQ(predictionFor(*store, a->measuredRunId)->predictedRunId, *a->predictedRunId);
  EXPECT_EQ(predictionFor(*store, b->measuredRunId)->predictedRunId, *b->predictedRunId);
}

TEST(MeasuredRun, FailedRunKeepsPartialTimelineErrorAndStderr) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto r = request();
  r.measured.ops.resize(2);  // device 1 never ran
  r.measured.complete = false;
  r.measured.metrics = core::computeMetrics(r.measured);
  r.status = ps::core::RunState::Failed;
  r.error = "B1@s1 on device 1: receive timed out after 60 s";
  r.stderrText = "rank 1: Segmentation fault\n";
  auto rec = recordMeasuredRun(*store, r);
  ASSERT_TRUE(rec) << rec.error().message;
  auto run = store->run(rec->measuredRunId);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->summary.status, ps::core::RunState::Failed);
  EXPECT_EQ(run->summary.error, r.error);
  EXPECT_EQ(configOf(*store, rec->measuredRunId)["stderr"], r.stderrText);
  auto t = store->loadTimeline(rec->measuredRunId);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ops.size(), 2u);
  EXPECT_FALSE(t->complete);
  // The prediction is still there and linked.
  EXPECT_TRUE(predictionFor(*store, rec->measuredRunId));
}

TEST(MeasuredRun, FailedRunWithoutErrorTextTakesTheTimelineDiagnostic) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto r = request();
  r.status = ps::core::RunState::Cancelled;
  r.measured.diagnostics.push_back(core::makeError("engine.cancelled", "cancelled at F1@s0"));
  auto rec = recordMeasuredRun(*store, r);
  ASSERT_TRUE(rec);
  auto run = store->run(rec->measuredRunId);
  EXPECT_EQ(run->summary.status, ps::core::RunState::Cancelled);
  EXPECT_EQ(run->summary.error, "cancelled at F1@s0");
}

TEST(MeasuredRun, LongStderrKeepsItsEnd) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto r = request();
  r.stderrText = std::string(100000, 'x') + "THE END";
  auto rec = recordMeasuredRun(*store, r);
  ASSERT_TRUE(rec);
  std::string kept = configOf(*store, rec->measuredRunId)["stderr"];
  EXPECT_EQ(kept.size(), 64u * 1024u);
  EXPECT_EQ(kept.substr(kept.size() - 7), "THE END");
}

TEST(MeasuredRun, WithoutPredictionOnlyTheMeasuredRunIsStored) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto r = request();
  r.predicted.reset();
  r.profileName.clear();
  auto rec = recordMeasuredRun(*store, r);
  ASSERT_TRUE(rec);
  EXPECT_FALSE(rec->predictedRunId);
  EXPECT_FALSE(rec->profileId);
  EXPECT_EQ(store->listRuns()->size(), 1u);
  auto link = predictionFor(*store, rec->measuredRunId);
  ASSERT_FALSE(link);
  EXPECT_EQ(link.error().code, "session.not-found");
}

TEST(MeasuredRun, RefusesBadInput) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto r = request();
  r.configJson = "[1,2";
  EXPECT_FALSE(recordMeasuredRun(*store, r));
  r = request();
  r.status = ps::core::RunState::Running;
  EXPECT_FALSE(recordMeasuredRun(*store, r));
  r = request();
  r.scheduleName.clear();
  EXPECT_FALSE(recordMeasuredRun(*store, r));
  EXPECT_TRUE(store->listRuns()->empty());
  // A run that is not a measured run, or does not exist, has no prediction.
  EXPECT_EQ(predictionFor(*store, 12345).error().code, "session.not-found");
}

TEST(MeasuredRun, SetRunConfigRefusesNonObjectsAndMissingRuns) {
  auto dir = test::freshDir();
  auto store = SessionStore::open((dir / "s.pssession").string());
  ASSERT_TRUE(store);
  auto id = store->recordTimeline(RunInfo{}, predictedTimeline());
  ASSERT_TRUE(id);
  EXPECT_FALSE(store->setRunConfig(*id, "[1]"));
  EXPECT_FALSE(store->setRunConfig(*id, "{"));
  EXPECT_EQ(store->setRunConfig(*id + 100, "{}").error().code, "session.not-found");
  ASSERT_TRUE(store->setRunConfig(*id, R"({"a":1})"));
  EXPECT_EQ(configOf(*store, *id)["a"], 1);
}

}  // namespace
}  // namespace ps::sessions
