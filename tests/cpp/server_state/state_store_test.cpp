// StateStore: the schema, every create/read/update path, the atomicity of closing a round, the
// clean-up on open and interrupted rounds, and nonces.
#include <thread>

#include "server/safetensors.h"
#include "state_store_fixture.h"

namespace {

using namespace tn::server::state_test;

// ---- schema -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, CreatesTheSchemaAtItsLatestMigrationOnce) {
  {
    StateStore store = open();
    EXPECT_EQ(store.schema_version(), 2);
  }
  StateStore reopened = open();  // a second open must not apply the migrations again
  EXPECT_EQ(reopened.schema_version(), 2);
  RawDatabase raw(directory_);
  EXPECT_EQ(raw.column("SELECT version FROM schema_migrations"), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(raw.column("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"),
            (std::vector<std::string>{"devices", "events", "model_versions", "round_devices", "rounds",
                                      "schema_migrations", "strategy_states", "tasks", "used_nonces"}));
  EXPECT_EQ(raw.column("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_EQ(raw.column("PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}

TEST_F(StateStoreTest, RefusesADatabaseFromANewerBuild) {
  { StateStore store = open(); }
  RawDatabase(directory_).execute("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (3, 0)");
  try {
    open();
    FAIL() << "a schema newer than the build was accepted";
  } catch (const StateError& error) {
    EXPECT_NE(std::string(error.what()).find("schema version 3, newer than the 2"), std::string::npos)
        << error.what();
  }
}

TEST_F(StateStoreTest, OneStoreAtATimePerDirectory) {
  StateStore store = open();
  EXPECT_THROW(open(), Conflict);
}

TEST_F(StateStoreTest, ForeignKeysAreEnforced) {
  StateStore store = open();
  populate(store);
  // A round of a task that does not exist, through the store's own connection settings, is
  // refused; through a raw connection (foreign keys off by default) the check finds it.
  EXPECT_THROW(store.begin_round("nope", {1, 0, {"a"}, 0}), NotFound);
  RawDatabase raw(directory_);
  raw.execute(
      "INSERT INTO round_devices (task_id, round_number, device_id, outcome) VALUES ('mnist', 9, 'zz', "
      "'selected')");
  EXPECT_EQ(raw.column("PRAGMA foreign_key_check").size(), 2u);
}

// ---- devices ----------------------------------------------------------------------------------

TEST_F(StateStoreTest, RegistersFindsTouchesAndListsDevices) {
  {
    StateStore store = open();
    const Device phone = store.register_device("phone-1", public_key(1), {{"memory_bytes", 4096}});
    EXPECT_EQ(phone.registered_at_ms, now_ms_);
    EXPECT_EQ(phone.last_seen_ms, now_ms_);
    store.register_device("laptop", public_key(2), nlohmann::json::object());

    EXPECT_EQ(store.device("phone-1")->metadata["memory_bytes"], 4096);
    EXPECT_EQ(store.find_device_by_key(public_key(2))->id, "laptop");
    EXPECT_FALSE(store.find_device_by_key(public_key(3)));
    EXPECT_FALSE(store.device("tablet"));

    now_ms_ += 5000;
    // Forward only, unknown devices skipped, all in one transaction.
    EXPECT_EQ(store.record_last_seen({{"phone-1", now_ms_}, {"laptop", now_ms_ - 9000}, {"tablet", now_ms_}}),
              1u);
    EXPECT_EQ(store.device("phone-1")->last_seen_ms, now_ms_);
    EXPECT_EQ(store.device("phone-1")->registered_at_ms, now_ms_ - 5000);
    EXPECT_EQ(store.device("laptop")->last_seen_ms, now_ms_ - 5000);
  }
  StateStore reopened = open();
  const std::vector<Device> devices = reopened.list_devices();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].id, "laptop");
  EXPECT_EQ(devices[1].id, "phone-1");
  EXPECT_EQ(devices[1].public_key, public_key(1));
  EXPECT_EQ(devices[1].last_seen_ms, now_ms_);
}

TEST_F(StateStoreTest, RefusesDuplicateAndMalformedDevices) {
  StateStore store = open();
  store.register_device("phone-1", public_key(1), {});
  EXPECT_THROW(store.register_device("phone-1", public_key(2), {}), Conflict);
  try {
    store.register_device("phone-2", public_key(1), {});
    FAIL() << "a public key was registered twice";
  } catch (const Conflict& error) {
    EXPECT_NE(std::string(error.what()).find("already registered to device 'phone-1'"), std::string::npos);
  }
  EXPECT_THROW(store.register_device("phone-3", std::string(31, 'k'), {}), InvalidArgument);
  EXPECT_THROW(store.register_device("phone/3", public_key(3), {}), InvalidArgument);
  EXPECT_THROW(store.register_device("", public_key(3), {}), InvalidArgument);
  EXPECT_EQ(store.list_devices().size(), 1u);
}

// ---- tasks ------------------------------------------------------------------------------------

TEST_F(StateStoreTest, CreatesReadsListsAndEndsTasks) {
  StateStore store = open();
  const TaskRecord created = store.create_task(definition("mnist"), small_model());
  EXPECT_EQ(created.state, TaskState::Running);
  now_ms_ += 1;
  store.create_task(definition("cifar", "fedavgm"), small_model(2));

  const std::optional<TaskRecord> mnist = store.task("mnist");
  ASSERT_TRUE(mnist);
  EXPECT_EQ(mnist->definition.strategy, "fedavg");
  EXPECT_EQ(mnist->definition.round_params["devices_per_round"], 2);
  EXPECT_EQ(mnist->definition.rounds_planned, 5u);
  EXPECT_EQ(mnist->created_at_ms, now_ms_ - 1);
  EXPECT_FALSE(store.task("imagenet"));
  ASSERT_EQ(store.list_tasks().size(), 2u);
  EXPECT_EQ(store.list_tasks()[0].definition.id, "mnist");  // creation order

  // Version 0 is the initial model, in a file whose bytes hash to the recorded digest.
  const std::vector<ModelVersionRecord> versions = store.list_model_versions("mnist");
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0].version, 0u);
  EXPECT_EQ(versions[0].file_path, "models/mnist/0.safetensors");
  const std::string bytes = file_contents(directory_ / versions[0].file_path);
  EXPECT_EQ(bytes.size(), versions[0].byte_size);
  EXPECT_EQ(blake2b_hex(bytes), versions[0].blake2b_256_hex);
  EXPECT_EQ(bytes, encode_safetensors(small_model()));
  expect_same_model(small_model(), store.load_model("mnist", 0));
  EXPECT_EQ(store.load_strategy_state("cifar", 0).meta["strategy"], "fedavgm");
  EXPECT_EQ(store.latest_model_version("cifar"), 0u);
  EXPECT_THROW(store.load_model("mnist", 1), NotFound);
  EXPECT_THROW(store.load_model("imagenet", 0), NotFound);

  store.set_task_state("cifar", TaskState::Stopped, "operator request");
  EXPECT_EQ(store.task("cifar")->state, TaskState::Stopped);
  EXPECT_EQ(store.task("cifar")->state_reason, "operator request");
  EXPECT_THROW(store.set_task_state("cifar", TaskState::Completed, ""), Conflict);
  EXPECT_THROW(store.set_task_state("mnist", TaskState::Running, ""), InvalidArgument);
  EXPECT_THROW(store.set_task_state("imagenet", TaskState::Stopped, ""), NotFound);
}

TEST_F(StateStoreTest, RefusesDuplicateAndMalformedTasks) {
  StateStore store = open();
  store.create_task(definition("mnist"), small_model());
  EXPECT_THROW(store.create_task(definition("mnist"), small_model()), Conflict);
  EXPECT_THROW(store.create_task(definition(".."), small_model()), InvalidArgument);
  EXPECT_THROW(store.create_task(definition("a/b"), small_model()), InvalidArgument);
  EXPECT_THROW(store.create_task(definition("t2", "fedmagic"), small_model()), InvalidArgument);
  TaskDefinition bad_params = definition("t3", "fedavgm");
  bad_params.strategy_params = {{"server_momentum", 2.0}};
  EXPECT_THROW(store.create_task(bad_params, small_model()), InvalidArgument);
  Model short_tensor = small_model();
  short_tensor.tensors[0].nbytes = 12;  // the shape says 16
  EXPECT_THROW(store.create_task(definition("t4"), short_tensor), InvalidArgument);
  EXPECT_EQ(store.list_tasks().size(), 1u);
  // Nothing of the refused tasks was left on disk.
  EXPECT_EQ(files_under(directory_ / "models"), std::set<std::string>{"mnist/0.safetensors"});
}

// ---- rounds -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, BeginsAndClosesRounds) {
  StateStore store = open();
  populate(store);
  EXPECT_FALSE(store.last_committed_round("mnist"));

  EXPECT_THROW(store.begin_round("mnist", {2, 0, {"a"}, 0}), Conflict);        // not the next number
  EXPECT_THROW(store.begin_round("mnist", {1, 1, {"a"}, 0}), Conflict);        // not the latest version
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {"a", "zz"}, 0}), NotFound);  // unregistered device
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {"a", "a"}, 0}), InvalidArgument);
  EXPECT_THROW(store.begin_round("mnist", {1, 0, {}, 0}), InvalidArgument);

  const RoundRecord begun = store.begin_round("mnist", {1, 0, {"c", "a", "b"}, now_ms_ + 60000});
  EXPECT_EQ(begun.state, RoundState::Open);
  EXPECT_EQ(begun.selected, (std::vector<DeviceId>{"a", "b", "c"}));
  EXPECT_EQ(begun.deadline_ms, now_ms_ + 60000);
  EXPECT_FALSE(begun.closed_at_ms);
  EXPECT_THROW(store.begin_round("mnist", {2, 0, {"a"}, 0}), Conflict);  // one open round per task
  EXPECT_THROW(store.set_task_state("mnist", TaskState::Stopped, ""), Conflict);

  // Contributors and missing must partition the selection exactly.
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1)), InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {"c", "zz"}, small_model(2), 1)),
               InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 1, completed({"a", "b"}, {"b", "c"}, small_model(2), 1)),
               InvalidArgument);
  RoundResult without_model = completed({"a"}, {"b", "c"}, small_model(2), 1);
  without_model.new_model.reset();
  EXPECT_THROW(store.close_round("mnist", 1, without_model), InvalidArgument);
  RoundResult other_strategy = completed({"a"}, {"b", "c"}, small_model(2), 1);
  other_strategy.strategy_state->meta["strategy"] = "krum";
  EXPECT_THROW(store.close_round("mnist", 1, other_strategy), InvalidArgument);
  EXPECT_THROW(store.close_round("mnist", 2, completed({"a"}, {"b", "c"}, small_model(2), 1)), NotFound);

  now_ms_ += 1000;
  const RoundRecord closed = store.close_round("mnist", 1, completed({"c", "a"}, {"b"}, small_model(2), 1));
  EXPECT_EQ(closed.state, RoundState::Completed);
  EXPECT_EQ(closed.contributors, (std::vector<DeviceId>{"a", "c"}));
  EXPECT_EQ(closed.missing, std::vector<DeviceId>{"b"});
  EXPECT_EQ(closed.model_version_out, 1u);
  EXPECT_EQ(closed.closed_at_ms, now_ms_);
  EXPECT_THROW(store.close_round("mnist", 1, abandoned({"a"}, {"b", "c"})), Conflict);
  EXPECT_EQ(store.latest_model_version("mnist"), 1u);
  expect_same_model(small_model(2), store.load_model("mnist", 1));
  EXPECT_EQ(store.load_strategy_state("mnist", 1).meta["rounds"], 1);

  store.begin_round("mnist", {2, 1, {"a", "b"}, 0});
  RoundResult with_contribution = abandoned({"a"}, {"b"});
  with_contribution.new_model = small_model(3);
  EXPECT_THROW(store.close_round("mnist", 2, with_contribution), InvalidArgument);
  const RoundRecord given_up = store.close_round("mnist", 2, abandoned({"a"}, {"b"}));
  EXPECT_EQ(given_up.state, RoundState::Abandoned);
  EXPECT_FALSE(given_up.model_version_out);
  EXPECT_EQ(given_up.abandon_reason, "1 of the 2 updates required arrived");
  EXPECT_FALSE(given_up.interrupted);
  EXPECT_EQ(store.latest_model_version("mnist"), 1u);
  EXPECT_EQ(store.last_committed_round("mnist")->round_number, 2u);

  // The task ends with its last round, in the same transaction.
  store.begin_round("mnist", {3, 1, {"a", "b", "c"}, 0});
  RoundResult last = completed({"a", "b", "c"}, {}, small_model(4), 2);
  last.task_end = TaskEnd{TaskState::Completed, "5 rounds planned, 5 done"};
  store.close_round("mnist", 3, last);
  EXPECT_EQ(store.task("mnist")->state, TaskState::Completed);
  EXPECT_THROW(store.begin_round("mnist", {4, 2, {"a"}, 0}), Conflict);

  const std::vector<RoundRecord> rounds = store.list_rounds("mnist");
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[2].model_version_in, 1u);
  EXPECT_EQ(rounds[2].model_version_out, 2u);
  EXPECT_EQ(store.round("mnist", 1)->contributors, (std::vector<DeviceId>{"a", "c"}));
  EXPECT_FALSE(store.round("mnist", 4));
  EXPECT_EQ(store.list_model_versions("mnist").size(), 3u);
}

// A failure anywhere in close_round leaves the round open and no model version, row or file.
TEST_F(StateStoreTest, ClosingARoundIsAllOrNothing) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a", "b"}, 0});
    store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1));
    store.begin_round("mnist", {2, 1, {"a", "b"}, 0});

    // The strategy state is refused after the model file was written: that file goes too.
    RoundResult bad_state = completed({"a"}, {"b"}, small_model(3), 2);
    bad_state.strategy_state->tensors.tensors.push_back(
        tensor_of<double>("momentum/weight", ScalarType::Double, {2, 2}, {1, 2, 3}));
    EXPECT_THROW(store.close_round("mnist", 2, bad_state), InvalidArgument);
    EXPECT_FALSE(fs::exists(directory_ / "models/mnist/2.safetensors"));

    // The database refuses the last insert of the transaction (a trigger stands in for a full
    // disk): the round's update, the model version and the file are all gone.
    RawDatabase(directory_)
        .execute(
            "CREATE TRIGGER refuse_state BEFORE INSERT ON strategy_states BEGIN SELECT RAISE(ABORT, 'disk "
            "full'); END");
    EXPECT_THROW(store.close_round("mnist", 2, completed({"a"}, {"b"}, small_model(3), 2)), DatabaseError);
    EXPECT_EQ(store.round("mnist", 2)->state, RoundState::Open);
    EXPECT_TRUE(store.round("mnist", 2)->contributors.empty());
    EXPECT_EQ(store.latest_model_version("mnist"), 1u);
    EXPECT_FALSE(fs::exists(directory_ / "models/mnist/2.safetensors"));
    EXPECT_FALSE(fs::exists(directory_ / "strategy_states/mnist/2.safetensors"));

    RawDatabase(directory_).execute("DROP TRIGGER refuse_state");
    store.close_round("mnist", 2, completed({"a"}, {"b"}, small_model(3), 2));
    EXPECT_EQ(store.latest_model_version("mnist"), 2u);
  }
  StateStore reopened = open();
  EXPECT_TRUE(reopened.open_report().removed_files.empty());
  EXPECT_TRUE(reopened.open_report().damaged_files.empty());
  expect_same_model(small_model(3), reopened.load_model("mnist", 2));
}

// ---- open: clean-up and interrupted rounds ------------------------------------------------------

TEST_F(StateStoreTest, DeletesFilesLeftByInterruptedWritesOnOpen) {
  {
    StateStore store = open();
    populate(store);
  }
  const std::set<std::string> committed = files_under(directory_ / "models");
  write_contents(directory_ / "models/mnist/.tmp-1.safetensors", "half a mod");  // killed mid-write
  write_contents(directory_ / "models/mnist/1.safetensors",
                 encode_safetensors(small_model(2)));  // before commit
  write_contents(directory_ / "strategy_states/mnist/1.safetensors", encode_safetensors({}));
  fs::create_directories(directory_ / "models/never-committed");
  write_contents(directory_ / "models/never-committed/0.safetensors", encode_safetensors(small_model()));

  StateStore store = open();
  std::vector<std::string> removed = store.open_report().removed_files;
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed,
            (std::vector<std::string>{(directory_ / "models/mnist/.tmp-1.safetensors").string(),
                                      (directory_ / "models/mnist/1.safetensors").string(),
                                      (directory_ / "models/never-committed/0.safetensors").string(),
                                      (directory_ / "strategy_states/mnist/1.safetensors").string()}));
  EXPECT_EQ(files_under(directory_ / "models"), committed);
  EXPECT_FALSE(fs::exists(directory_ / "models/never-committed"));
  EXPECT_TRUE(store.open_report().damaged_files.empty());
  EXPECT_TRUE(store.verify_files().empty());
  expect_same_model(small_model(), store.load_model("mnist", 0));
}

TEST_F(StateStoreTest, MarksRoundsLeftOpenAsInterruptedAndResumesAfterThem) {
  {
    StateStore store = open();
    populate(store);
    store.begin_round("mnist", {1, 0, {"a", "b"}, 0});
    store.close_round("mnist", 1, completed({"a", "b"}, {}, small_model(2), 1));
    store.begin_round("mnist", {2, 1, {"a", "b"}, 0});
    store.close_round("mnist", 2, abandoned({"a"}, {"b"}));
    store.begin_round("mnist", {3, 1, {"a", "b", "c"}, 0});
  }  // the coordinator stops with round 3 open
  now_ms_ += 7000;
  StateStore store = open();
  EXPECT_EQ(store.open_report().interrupted_rounds,
            (std::vector<std::pair<std::string, uint64_t>>{{"mnist", 3}}));
  const RoundRecord interrupted = *store.round("mnist", 3);
  EXPECT_EQ(interrupted.state, RoundState::Abandoned);
  EXPECT_TRUE(interrupted.interrupted);
  EXPECT_EQ(interrupted.closed_at_ms, now_ms_);
  EXPECT_EQ(interrupted.selected.size(), 3u);
  EXPECT_TRUE(interrupted.contributors.empty());  // who had sent an update is not known

  const ResumePoint point = store.resume_point("mnist");
  EXPECT_EQ(point.model_version, 1u);
  expect_same_model(small_model(2), point.model);
  EXPECT_EQ(point.strategy_state.meta["rounds"], 1);
  EXPECT_EQ(point.last_committed_round->round_number, 3u);
  EXPECT_EQ(point.next_round_number, 4u);
  EXPECT_EQ(point.abandoned_in_a_row, 1u);  // round 2; the interrupted round 3 does not count
  const tn::federated::TaskCheckpoint checkpoint = point.checkpoint();
  EXPECT_EQ(checkpoint.meta, (nlohmann::json{{"task", "mnist"},
                                             {"model_version", 1},
                                             {"next_round_id", 4},
                                             {"abandoned_in_a_row", 1},
                                             {"failure", ""}}));
  store.begin_round("mnist", {4, 1, {"a"}, 0});
}

// ---- nonces -----------------------------------------------------------------------------------

// ---- events -----------------------------------------------------------------------------------

TEST_F(StateStoreTest, KeepsEventsAcrossReopeningAndReadsThemAfterASequenceByTask) {
  {
    StateStore store = open();
    EXPECT_EQ(store.latest_event_sequence(), 0u);
    store.append_events({{1, now_ms_, "EVENT_KIND_TASK_CREATED", "mnist", 0, "", "fedavg"},
                         {2, now_ms_, "EVENT_KIND_DEVICE_REGISTERED", "", 0, "a", "linux"}});
    store.append_events({{5, now_ms_ + 1, "EVENT_KIND_ROUND_STARTED", "mnist", 1, "", "2 devices"}});
    // Sequences only go up, and a refused batch stores nothing of itself.
    EXPECT_THROW(store.append_events({{6, now_ms_, "EVENT_KIND_ROUND_FAILED", "mnist", 1, "", ""},
                                      {5, now_ms_, "EVENT_KIND_ROUND_FAILED", "mnist", 1, "", ""}}),
                 Conflict);
  }
  StateStore store = open();
  EXPECT_EQ(store.latest_event_sequence(), 5u);
  auto sequences = [](const std::vector<StoredEvent>& events) {
    std::vector<uint64_t> numbers;
    for (const StoredEvent& event : events) numbers.push_back(event.sequence);
    return numbers;
  };
  EXPECT_EQ(sequences(store.events_after(0, "", 10)), (std::vector<uint64_t>{1, 2, 5}));
  EXPECT_EQ(sequences(store.events_after(1, "", 10)), (std::vector<uint64_t>{2, 5}));
  EXPECT_EQ(sequences(store.events_after(0, "mnist", 10)), (std::vector<uint64_t>{1, 5}));
  EXPECT_EQ(sequences(store.events_after(0, "", 2)), (std::vector<uint64_t>{1, 2}));
  const StoredEvent started = store.events_after(2, "mnist", 1).at(0);
  EXPECT_EQ(started.kind, "EVENT_KIND_ROUND_STARTED");
  EXPECT_EQ(started.round_id, 1u);
  EXPECT_EQ(started.time_unix_ms, now_ms_ + 1);
  EXPECT_EQ(started.message, "2 devices");
}

TEST_F(StateStoreTest, OpeningForgetsAllButTheLatestEventsAndTheNumberingGoesOn) {
  {
    StateStore store = open();
    for (uint64_t sequence = 1; sequence <= 5; ++sequence)
      store.append_events({{sequence, now_ms_, "EVENT_KIND_TASK_CREATED", "t", 0, "", ""}});
  }
  OpenOptions keep_two = options();
  keep_two.events_kept = 2;
  StateStore store = StateStore::open(directory_, keep_two);
  ASSERT_EQ(store.events_after(0, "", 10).size(), 2u);
  EXPECT_EQ(store.events_after(0, "", 10).front().sequence, 4u);
  EXPECT_EQ(store.latest_event_sequence(), 5u);
  EXPECT_THROW(store.append_events({{3, now_ms_, "EVENT_KIND_TASK_CREATED", "t", 0, "", ""}}), Conflict);
}

TEST_F(StateStoreTest, RefusesAReusedNonceUntilItIsPruned) {
  const std::string nonce(16, '\x01');
  {
    StateStore store = open();
    EXPECT_TRUE(store.record_nonce("phone-1", nonce, 1000));
    EXPECT_FALSE(store.record_nonce("phone-1", nonce, 2000));
    EXPECT_TRUE(store.record_nonce("phone-2", nonce, 1000));  // nonces are per signer
    EXPECT_TRUE(store.record_nonce("", std::string(16, '\x02'), 3000));
    EXPECT_THROW(store.record_nonce("phone-1", "", 1000), InvalidArgument);
    EXPECT_THROW(store.record_nonce(std::string(300, 'k'), nonce, 1000), InvalidArgument);
  }
  StateStore store = open();
  EXPECT_FALSE(store.record_nonce("phone-1", nonce, 2000));  // remembered across a restart
  EXPECT_EQ(store.prune_nonces(2000), 2u);
  EXPECT_EQ(store.prune_nonces(2000), 0u);
  EXPECT_TRUE(store.record_nonce("phone-1", nonce, 4000));
  EXPECT_FALSE(store.record_nonce("", std::string(16, '\x02'), 4000));
}

TEST_F(StateStoreTest, RecordsABatchOfNoncesInOneGoAndRefusesItWholeForABadOne) {
  StateStore store = open();
  EXPECT_TRUE(store.record_nonce("phone-1", "used", 1000));
  using Use = StateStore::NonceUse;
  EXPECT_EQ(store.record_nonces({Use{"phone-1", "a", 1000}, Use{"phone-1", "used", 1000},
                                 Use{"phone-2", "a", 1000}, Use{"phone-1", "a", 1000}}),
            (std::vector<bool>{true, false, true, false}));
  // A nonce the store cannot take refuses the batch before anything is written.
  EXPECT_THROW(store.record_nonces({Use{"phone-1", "b", 1000}, Use{"phone-1", "", 1000}}), InvalidArgument);
  EXPECT_TRUE(store.record_nonce("phone-1", "b", 1000));
  EXPECT_EQ(store.nonce_problem("phone-1", std::string(1025, 'n')).value_or(""),
            "nonce of key 'phone-1': 1025 bytes, not 1 to 1024");
  EXPECT_EQ(store.nonce_problem("phone-1", "fine"), std::nullopt);
}

}  // namespace
