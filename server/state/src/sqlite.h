// A thin RAII layer over the SQLite C API: a connection, prepared statements with typed binds,
// and an immediate transaction that rolls back unless committed. Every failure becomes a
// DatabaseError quoting SQLite's message, the statement and the database file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tn::server::detail {

// Binds as a BLOB; a plain std::string_view binds as TEXT.
struct Blob {
  std::string_view bytes;
};

class Database;

class Statement {
 public:
  Statement(const Database& database, std::string_view sql);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are numbered from 1, in the order given.
  template <typename... Values>
  Statement& bind(const Values&... values) {
    int index = 0;
    (bind_one(++index, values), ...);
    return *this;
  }
  // True while a row is available; false once the statement is done.
  bool step();
  // Runs a statement that returns no rows, then resets it for the next bind.
  void run();

  int64_t integer(int column) const;
  std::optional<int64_t> optional_integer(int column) const;
  std::string text(int column) const;
  std::string blob(int column) const;

 private:
  void bind_one(int index, int64_t value);
  void bind_one(int index, uint64_t value);
  void bind_one(int index, int value) { bind_one(index, int64_t{value}); }
  void bind_one(int index, std::string_view value);
  void bind_one(int index, const std::string& value) { bind_one(index, std::string_view(value)); }
  void bind_one(int index, const char* value) { bind_one(index, std::string_view(value)); }
  void bind_one(int index, Blob value);
  void bind_one(int index, std::nullopt_t);
  template <typename T>
  void bind_one(int index, const std::optional<T>& value) {
    if (value)
      bind_one(index, *value);
    else
      bind_one(index, std::nullopt);
  }
  void check(int code) const;

  const Database& database_;
  sqlite3_stmt* statement_ = nullptr;
  std::string sql_;
};

class Database {
 public:
  explicit Database(const std::string& path);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more statements that return no rows.
  void execute(std::string_view sql);
  // The first column of the single row `sql` returns, as text (for PRAGMAs).
  std::string query_text(std::string_view sql);
  int changes() const { return sqlite3_changes(handle_); }

  sqlite3* handle() const { return handle_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(std::string_view sql) const;

 private:
  sqlite3* handle_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE: the write lock is taken at once, so what the transaction reads cannot change
// before it writes. Rolled back on destruction unless commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database& database);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Database& database_;
  bool finished_ = false;
};

}  // namespace tn::server::detail
