#include "sqlite.h"

#include <limits>

#include "server/state_errors.h"

namespace tn::server::detail {

namespace {

std::string excerpt(std::string_view sql) {
  constexpr size_t kShown = 120;
  std::string shown(sql.substr(0, kShown));
  if (sql.size() > kShown) shown += "...";
  return shown;
}

}  // namespace

Database::Database(const std::string& path) : path_(path) {
  const int code = sqlite3_open_v2(path.c_str(), &handle_,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (code != SQLITE_OK) {
    const std::string message = handle_ ? sqlite3_errmsg(handle_) : sqlite3_errstr(code);
    sqlite3_close(handle_);
    throw DatabaseError("cannot open the state database " + path + ": " + message);
  }
  sqlite3_extended_result_codes(handle_, 1);
}

Database::~Database() { sqlite3_close(handle_); }

void Database::fail(std::string_view sql) const {
  throw DatabaseError("state database " + path_ + ": " + sqlite3_errmsg(handle_) + " (in: " + excerpt(sql) +
                      ")");
}

void Database::execute(std::string_view sql) {
  const std::string statements(sql);
  if (sqlite3_exec(handle_, statements.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
}

std::string Database::query_text(std::string_view sql) {
  Statement statement(*this, sql);
  if (!statement.step()) throw DatabaseError("state database " + path_ + ": no row from " + std::string(sql));
  return statement.text(0);
}

Statement::Statement(const Database& database, std::string_view sql) : database_(database), sql_(sql) {
  if (sqlite3_prepare_v2(database_.handle(), sql_.data(), int(sql_.size()), &statement_, nullptr) !=
      SQLITE_OK)
    database_.fail(sql_);
}

Statement::~Statement() { sqlite3_finalize(statement_); }

void Statement::check(int code) const {
  if (code != SQLITE_OK) database_.fail(sql_);
}

void Statement::bind_one(int index, int64_t value) { check(sqlite3_bind_int64(statement_, index, value)); }

void Statement::bind_one(int index, uint64_t value) {
  if (value > uint64_t(std::numeric_limits<int64_t>::max()))
    throw InvalidArgument("state database: " + std::to_string(value) +
                          " does not fit SQLite's 64-bit signed integers (in: " + excerpt(sql_) + ")");
  bind_one(index, int64_t(value));
}

void Statement::bind_one(int index, std::string_view value) {
  check(sqlite3_bind_text64(statement_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::bind_one(int index, Blob value) {
  // A zero-length blob still binds as a BLOB (not NULL) because the pointer is never null.
  check(sqlite3_bind_blob64(statement_, index, value.bytes.empty() ? "" : value.bytes.data(),
                            value.bytes.size(), SQLITE_TRANSIENT));
}

void Statement::bind_one(int index, std::nullopt_t) { check(sqlite3_bind_null(statement_, index)); }

bool Statement::step() {
  const int code = sqlite3_step(statement_);
  if (code == SQLITE_ROW) return true;
  if (code == SQLITE_DONE) return false;
  database_.fail(sql_);
}

void Statement::run() {
  if (step())
    throw DatabaseError("state database: a row from a statement that returns none: " + excerpt(sql_));
  sqlite3_reset(statement_);
}

int64_t Statement::integer(int column) const { return sqlite3_column_int64(statement_, column); }

std::optional<int64_t> Statement::optional_integer(int column) const {
  if (sqlite3_column_type(statement_, column) == SQLITE_NULL) return std::nullopt;
  return integer(column);
}

std::string Statement::text(int column) const {
  const auto* bytes = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
  return bytes ? std::string(bytes, size_t(sqlite3_column_bytes(statement_, column))) : std::string();
}

std::string Statement::blob(int column) const {
  const auto* bytes = static_cast<const char*>(sqlite3_column_blob(statement_, column));
  return bytes ? std::string(bytes, size_t(sqlite3_column_bytes(statement_, column))) : std::string();
}

Transaction::Transaction(Database& database) : database_(database) { database_.execute("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  // Nothing can be reported from a destructor; a failed rollback leaves SQLite to roll back on
  // the next statement or at close, which it does by itself.
  if (!finished_) sqlite3_exec(database_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  database_.execute("COMMIT");
  finished_ = true;
}

}  // namespace tn::server::detail
