// Parser for upstream's operator schema language (the `func:` lines of
// native_functions.yaml and the strings given to torch.library's define()).
#include <cctype>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "ops.h"

namespace tn {

namespace {

class SchemaParser {
 public:
  SchemaParser(const std::string& text, const std::string& default_ns)
      : text_(text), default_ns_(default_ns) {}

  Schema parse() {
    Schema schema;
    std::string qualified = identifier(".:");
    auto sep = qualified.find("::");
    if (sep == std::string::npos) {
      schema.ns = default_ns_;
    } else {
      schema.ns = qualified.substr(0, sep);
      qualified = qualified.substr(sep + 2);
    }
    auto dot = qualified.find('.');
    schema.name = qualified.substr(0, dot);
    if (dot != std::string::npos) schema.overload = qualified.substr(dot + 1);
    expect('(');
    bool kwarg_only = false;
    while (!accept(')')) {
      if (!schema.arguments.empty() || kwarg_only) expect_comma_between();
      if (accept('*')) {
        kwarg_only = true;
        continue;
      }
      if (lookahead("...")) {
        pos_ += 3;
        schema.is_vararg = true;
        continue;
      }
      SchemaArgument arg = argument(true);
      arg.kwarg_only = kwarg_only;
      arg.is_out = kwarg_only && arg.type.kind == SchemaType::Kind::Tensor && arg.type.is_write();
      schema.arguments.push_back(std::move(arg));
    }
    skip_space();
    if (!lookahead("->")) fail_here("expected '->'");
    pos_ += 2;
    skip_space();
    if (lookahead("...")) {
      pos_ += 3;  // variadic returns (prim:: operators)
    } else if (accept('(')) {
      while (!accept(')')) {
        if (!schema.returns.empty()) expect(',');
        schema.returns.push_back(argument(false));
      }
    } else {
      schema.returns.push_back(argument(false));
    }
    skip_space();
    if (pos_ != text_.size()) fail_here("trailing text");
    return schema;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool lookahead(const char* s) const { return text_.compare(pos_, std::strlen(s), s) == 0; }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail_here(std::string("expected '") + c + "'");
  }
  void expect_comma_between() {
    // Arguments after '*' still need the comma the '*' was followed by.
    expect(',');
  }
  [[noreturn]] void fail_here(const std::string& what) const {
    throw Error("schema parse error: " + what + " at position " + std::to_string(pos_) + " in '" + text_ +
                "'");
  }
  std::string identifier(const char* extra = "") {
    skip_space();
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '_' || std::strchr(extra, text_[pos_]) != nullptr))
      ++pos_;
    if (start == pos_) fail_here("expected identifier");
    return text_.substr(start, pos_ - start);
  }

  // Text of a balanced "(...)" group starting at the current '('.
  std::string balanced_group() {
    size_t start = pos_;
    int depth = 0;
    do {
      if (pos_ >= text_.size()) fail_here("unbalanced parentheses");
      if (text_[pos_] == '(') ++depth;
      if (text_[pos_] == ')') --depth;
      ++pos_;
    } while (depth > 0);
    return text_.substr(start, pos_ - start);
  }

  void alias_annotation(SchemaType& t) {
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != ')') ++pos_;
    t.alias = text_.substr(start, pos_ - start);
    expect(')');
  }

  SchemaType type() {
    SchemaType t;
    skip_space();
    // TorchScript types beyond native_functions.yaml's: tuples "(int, int)" and
    // containers "Dict(str, Tensor)", "Future(t)"; kept as spelled, kind Other.
    static const std::set<std::string> containers = {"Dict",     "Future", "Union", "RRef",
                                                     "Optional", "Await",  "List",  "Tuple"};
    if (pos_ < text_.size() && text_[pos_] == '(') {
      t.base = balanced_group();
    } else {
      t.base = identifier(".");
      skip_space();
      if (containers.count(t.base) && pos_ < text_.size() && text_[pos_] == '(') t.base += balanced_group();
    }
    static const std::map<std::string, SchemaType::Kind> kinds = {
        {"Tensor", SchemaType::Kind::Tensor},
        {"int", SchemaType::Kind::Int},
        {"SymInt", SchemaType::Kind::SymInt},
        {"float", SchemaType::Kind::Float},
        {"bool", SchemaType::Kind::Bool},
        {"str", SchemaType::Kind::Str},
        {"Scalar", SchemaType::Kind::Scalar},
        {"ScalarType", SchemaType::Kind::ScalarType},
        {"Layout", SchemaType::Kind::Layout},
        {"Device", SchemaType::Kind::Device},
        {"MemoryFormat", SchemaType::Kind::MemoryFormat},
        {"Generator", SchemaType::Kind::Generator},
        {"Dimname", SchemaType::Kind::Dimname},
        {"Storage", SchemaType::Kind::Storage},
        {"Stream", SchemaType::Kind::Stream},
        {"QScheme", SchemaType::Kind::QScheme},
    };
    auto it = kinds.find(t.base);
    t.kind = it == kinds.end() ? SchemaType::Kind::Other : it->second;
    if (accept('(')) alias_annotation(t);
    if (accept('?')) t.element_optional = true;  // provisional: becomes optional if no list follows
    if (accept('[')) {
      t.list = true;
      skip_space();
      size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ > start) t.fixed_size = std::stoll(text_.substr(start, pos_ - start));
      expect(']');
      while (accept('[')) {  // nested lists ("Tensor[][]"): kept as spelled, kind Other
        expect(']');
        t.base += "[]";
        t.kind = SchemaType::Kind::Other;
      }
      if (accept('(')) alias_annotation(t);  // "t[](a!)": the list itself is aliased
      if (accept('?')) t.optional = true;
    } else if (t.element_optional) {
      t.element_optional = false;
      t.optional = true;
    }
    return t;
  }

  SchemaArgument argument(bool allow_default) {
    SchemaArgument arg;
    arg.type = type();
    skip_space();
    if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      arg.name = identifier();
    if (allow_default && accept('=')) {
      skip_space();
      size_t start = pos_;
      int depth = 0;
      char quote = 0;
      while (pos_ < text_.size()) {
        char c = text_[pos_];
        if (quote) {
          if (c == '\\')
            ++pos_;  // an escaped character never ends the string
          else if (c == quote)
            quote = 0;
        } else if (c == '"' || c == '\'') {
          quote = c;
        } else if (c == '[' || c == '(') {
          ++depth;
        } else if (c == ']' || (c == ')' && depth > 0)) {
          --depth;
        } else if ((c == ',' || c == ')') && depth == 0) {
          break;
        }
        ++pos_;
      }
      std::string value = text_.substr(start, pos_ - start);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
      arg.default_text = value;
    }
    return arg;
  }

  const std::string& text_;
  std::string default_ns_;
  size_t pos_ = 0;
};

std::string strip_quotes(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'')) return s.substr(1, s.size() - 2);
  return s;
}

}  // namespace

Schema parse_schema(const std::string& text, const std::string& default_ns) {
  return SchemaParser(text, default_ns).parse();
}

std::string SchemaType::str() const {
  std::string s = base;
  if (!alias.empty()) s += "(" + alias + ")";
  if (list) {
    if (element_optional) s += "?";
    s += "[" + (fixed_size ? std::to_string(fixed_size) : std::string()) + "]";
  }
  if (optional) s += "?";
  return s;
}

std::string Schema::str() const {
  std::ostringstream out;
  out << qualified_name() << (overload.empty() ? "" : "." + overload) << "(";
  bool kw = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const auto& a = arguments[i];
    if (i) out << ", ";
    if (a.kwarg_only && !kw) {
      out << "*, ";
      kw = true;
    }
    out << a.type.str() << " " << a.name;
    if (a.default_text) out << "=" << *a.default_text;
  }
  out << ") -> ";
  if (returns.size() == 1 && returns[0].name.empty()) {
    out << returns[0].type.str();
  } else {
    out << "(";
    for (size_t i = 0; i < returns.size(); ++i) {
      out << (i ? ", " : "") << returns[i].type.str();
      if (!returns[i].name.empty()) out << " " << returns[i].name;
    }
    out << ")";
  }
  return out.str();
}

size_t Schema::out_count() const {
  size_t n = 0;
  for (const auto& a : arguments) n += a.is_out;
  return n;
}

IValue parse_default(const SchemaType& type, const std::string& text) {
  using K = SchemaType::Kind;
  if (text == "None") return IValue();
  if (type.list) {
    std::vector<int64_t> ints;
    std::vector<double> reals;
    std::vector<bool> bools;
    std::string body = text;
    if (!body.empty() && body.front() == '[') body = body.substr(1, body.size() - 2);
    std::stringstream items(body);
    std::string item;
    while (std::getline(items, item, ',')) {
      if (item.find_first_not_of(" ") == std::string::npos) continue;
      if (type.kind == K::Bool)
        bools.push_back(item.find("True") != std::string::npos);
      else if (type.kind == K::Float)
        reals.push_back(std::stod(item));
      else
        ints.push_back(std::stoll(item));
    }
    if (type.kind == K::Bool) return bools;
    if (type.kind == K::Float) return reals;
    // "int[2] stride=1" means the value repeated over the fixed size.
    if (type.fixed_size > 1 && ints.size() == 1) ints.assign(size_t(type.fixed_size), ints[0]);
    return ints;
  }
  switch (type.kind) {
    case K::Bool:
      return text == "True";
    case K::Int:
    case K::SymInt:
      if (text == "Mean") return int64_t{1};
      if (text == "Sum") return int64_t{2};
      if (text == "None") return IValue();
      return int64_t(std::stoll(text));
    case K::Float:
      if (text == "inf") return std::numeric_limits<double>::infinity();
      if (text == "-inf") return -std::numeric_limits<double>::infinity();
      return std::stod(text);
    case K::Scalar:
      if (text.find_first_of(".e") != std::string::npos) return Scalar(std::stod(text));
      if (text == "True" || text == "False") return Scalar(text == "True");
      return Scalar(int64_t(std::stoll(text)));
    case K::Str:
      return strip_quotes(text);
    case K::MemoryFormat:
      if (text == "contiguous_format") return int64_t(MemoryFormat::Contiguous);
      if (text == "preserve_format") return int64_t(MemoryFormat::Preserve);
      if (text == "channels_last") return int64_t(MemoryFormat::ChannelsLast);
      break;
    case K::ScalarType:
      if (text == "long") return int64_t(ScalarType::Long);
      if (text == "float") return int64_t(ScalarType::Float);
      if (text == "int") return int64_t(ScalarType::Int);
      break;
    case K::Layout:
      if (text == "strided") return int64_t{0};
      break;
    default:
      break;
  }
  throw Error("schema default '" + text + "' for type " + type.str() + " is not understood");
}

}  // namespace tn
