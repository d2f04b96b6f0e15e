#include "torch_file.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tn::admin {

namespace {

struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

uint64_t little_endian(std::string_view bytes, size_t at, size_t width) {
  if (at + width > bytes.size()) throw Refused("the file ends inside a zip record");
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= uint64_t(uint8_t(bytes[at + i])) << (8 * i);
  return value;
}

// {record name: its bytes} of a zip archive's stored (uncompressed) records, as torch.save
// writes them, found through the central directory.
std::map<std::string, std::string_view> zip_records(std::string_view zip) {
  constexpr size_t kEndRecordBytes = 22;
  const size_t end = zip.size() < kEndRecordBytes ? std::string_view::npos : zip.rfind("PK\x05\x06");
  if (end == std::string_view::npos) throw Refused("no zip end of central directory record");
  const uint64_t count = little_endian(zip, end + 10, 2);
  uint64_t at = little_endian(zip, end + 16, 4);
  if (count == 0xffff || at == 0xffffffff)
    throw Refused("a zip64 archive (over 4 GiB), which is not read here");
  std::map<std::string, std::string_view> records;
  for (uint64_t i = 0; i < count; ++i) {
    if (little_endian(zip, at, 4) != 0x02014b50) throw Refused("a damaged zip central directory");
    const uint64_t method = little_endian(zip, at + 10, 2), size = little_endian(zip, at + 20, 4);
    const uint64_t name_bytes = little_endian(zip, at + 28, 2), local = little_endian(zip, at + 42, 4);
    if (at + 46 + name_bytes > zip.size()) throw Refused("a damaged zip central directory");
    std::string name(zip.substr(at + 46, name_bytes));
    if (method != 0)
      throw Refused("record '" + name + "' is compressed; torch.save stores records as they are");
    if (little_endian(zip, local, 4) != 0x04034b50)
      throw Refused("record '" + name + "' has no local header");
    const uint64_t data = local + 30 + little_endian(zip, local + 26, 2) + little_endian(zip, local + 28, 2);
    if (data + size > zip.size()) throw Refused("record '" + name + "' runs past the end of the file");
    records[name] = zip.substr(data, size);
    at += 46 + name_bytes + little_endian(zip, at + 30, 2) + little_endian(zip, at + 32, 2);
  }
  return records;
}

// What a state_dict's pickle builds: None, bools and ints, strings, globals (module.name),
// tuples, dicts, storages (a dtype and a record key) and tensors.
struct Node;
using Value = std::shared_ptr<Node>;
struct Node {
  enum Kind { None, Int, Str, Global, Tuple, Dict, Storage, Tensor } kind = None;
  int64_t integer = 0;                           // Int (bools too); Tensor: the storage offset
  std::string text;                              // Str; Global: module.name; Storage: its record key
  ScalarType dtype = ScalarType::Float;          // Storage
  std::vector<Value> items;                      // Tuple; Tensor: its storage
  std::vector<std::pair<Value, Value>> entries;  // Dict
  std::vector<int64_t> size, stride;             // Tensor
};

Value make(Node::Kind kind) {
  auto node = std::make_shared<Node>();
  node->kind = kind;
  return node;
}

constexpr std::pair<const char*, ScalarType> kStorageDtypes[] = {
    {"torch.FloatStorage", ScalarType::Float}, {"torch.DoubleStorage", ScalarType::Double},
    {"torch.HalfStorage", ScalarType::Half},   {"torch.BFloat16Storage", ScalarType::BFloat16},
    {"torch.LongStorage", ScalarType::Long},   {"torch.IntStorage", ScalarType::Int},
    {"torch.ShortStorage", ScalarType::Short}, {"torch.CharStorage", ScalarType::Char},
    {"torch.ByteStorage", ScalarType::Byte},   {"torch.BoolStorage", ScalarType::Bool},
};

std::vector<int64_t> integers(const Value& tuple, const char* what) {
  if (tuple->kind != Node::Tuple) throw Refused(std::string("a tensor's ") + what + " is not a tuple");
  std::vector<int64_t> values;
  for (const Value& item : tuple->items) {
    if (item->kind != Node::Int || item->integer < 0)
      throw Refused(std::string("a tensor's ") + what + " is not sizes");
    values.push_back(item->integer);
  }
  return values;
}

// The pickle virtual machine, reduced to the opcodes of protocol 2 that torch.save emits for a
// state_dict, and to the callables that rebuild one.
class Unpickler {
 public:
  explicit Unpickler(std::string_view pickle) : in_(pickle) {}

  Value run() {
    for (;;) {
      const uint8_t op = byte();
      if (op == '.') break;
      step(op);
    }
    if (stack_.size() != 1) throw Refused("the pickle does not end with one object");
    return stack_.back();
  }

 private:
  uint8_t byte() { return uint8_t(take(1)[0]); }
  uint64_t number(size_t width) { return little_endian(take(width), 0, width); }
  std::string_view take(size_t count) {
    if (count > in_.size() - at_) throw Refused("the pickle ends early");
    at_ += count;
    return in_.substr(at_ - count, count);
  }
  std::string line() {
    const size_t end = in_.find('\n', at_);
    if (end == std::string_view::npos) throw Refused("the pickle ends early");
    std::string text(in_.substr(at_, end - at_));
    at_ = end + 1;
    return text;
  }
  Value pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) throw Refused("the pickle's stack underflows");
    Value top = stack_.back();
    stack_.pop_back();
    return top;
  }
  std::vector<Value> pop_mark() {
    if (marks_.empty()) throw Refused("the pickle has no mark to pop");
    std::vector<Value> items(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value integer(int64_t value) {
    Value node = make(Node::Int);
    node->integer = value;
    return node;
  }
  Value tuple(std::vector<Value> items) {
    Value node = make(Node::Tuple);
    node->items = std::move(items);
    return node;
  }
  void set_items(std::vector<Value> items) {
    Value dict = pop();
    if (dict->kind != Node::Dict || items.size() % 2) throw Refused("the pickle sets items of a non-dict");
    for (size_t i = 0; i < items.size(); i += 2) dict->entries.emplace_back(items[i], items[i + 1]);
    stack_.push_back(dict);
  }

  // Pushes the string, integer, bool or None opcode `op` encodes; false for any other opcode.
  bool push_literal(uint8_t op);
  void step(uint8_t op);
  Value reduce(const Value& callable, const Value& arguments);
  Value persistent(const Value& id);

  std::string_view in_;
  size_t at_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Value> memo_;
};

bool Unpickler::push_literal(uint8_t op) {
  switch (op) {
    case 'X': {
      Value node = make(Node::Str);
      node->text = std::string(take(number(4)));
      stack_.push_back(node);
      return true;
    }
    case 'K':
      stack_.push_back(integer(byte()));
      return true;
    case 'M':
      stack_.push_back(integer(int64_t(number(2))));
      return true;
    case 'J':
      stack_.push_back(integer(int32_t(uint32_t(number(4)))));
      return true;
    case 0x8a: {  // LONG1: torch.save's integers fit 8 bytes
      const size_t width = byte();
      if (width > 8) throw Refused("an integer wider than 64 bits");
      uint64_t value = width ? number(width) : 0;
      if (width && width < 8 && (value >> (8 * width - 1))) value |= ~uint64_t(0) << (8 * width);
      stack_.push_back(integer(int64_t(value)));
      return true;
    }
    case 0x88:  // NEWTRUE
      stack_.push_back(integer(1));
      return true;
    case 0x89:  // NEWFALSE
      stack_.push_back(integer(0));
      return true;
    case 'N':
      stack_.push_back(make(Node::None));
      return true;
    default:
      return false;
  }
}

void Unpickler::step(uint8_t op) {
  if (push_literal(op)) return;
  switch (op) {
    case 0x80:  // PROTO
      byte();
      return;
    case 'c': {  // GLOBAL
      Value node = make(Node::Global);
      node->text = line();
      node->text += "." + line();
      stack_.push_back(node);
      return;
    }
    case 'q':
    case 'r': {
      const uint64_t slot = op == 'q' ? byte() : number(4);
      if (stack_.empty()) throw Refused("the pickle memoizes an empty stack");
      memo_[slot] = stack_.back();
      return;
    }
    case 'h':
    case 'j': {
      const auto found = memo_.find(op == 'h' ? byte() : number(4));
      if (found == memo_.end()) throw Refused("the pickle reads a memo entry it never wrote");
      stack_.push_back(found->second);
      return;
    }
    case '(':
      marks_.push_back(stack_.size());
      return;
    case ')':
      stack_.push_back(tuple({}));
      return;
    case 't':
      stack_.push_back(tuple(pop_mark()));
      return;
    case 0x85:
    case 0x86:
    case 0x87: {
      std::vector<Value> items(op - 0x84);
      for (auto item = items.rbegin(); item != items.rend(); ++item) *item = pop();
      stack_.push_back(tuple(std::move(items)));
      return;
    }
    case '}':
      stack_.push_back(make(Node::Dict));
      return;
    case 's': {
      Value value = pop(), key = pop();
      set_items({key, value});
      return;
    }
    case 'u':
      set_items(pop_mark());
      return;
    case 'Q':
      stack_.push_back(persistent(pop()));
      return;
    case 'R': {
      Value arguments = pop(), callable = pop();
      stack_.push_back(reduce(callable, arguments));
      return;
    }
    case 'b': {  // BUILD: a state_dict's OrderedDict gets its _metadata, which the model has no use for
      pop();
      if (stack_.empty() || stack_.back()->kind != Node::Dict) throw Refused("the pickle builds a non-dict");
      return;
    }
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", op);
      throw Refused(std::string("pickle opcode ") + code +
                    ", which a state_dict's pickle has not (save model.state_dict(), not the model)");
    }
  }
}

Value Unpickler::reduce(const Value& callable, const Value& arguments) {
  if (callable->kind != Node::Global || arguments->kind != Node::Tuple) throw Refused("a malformed REDUCE");
  const std::vector<Value>& args = arguments->items;
  if (callable->text == "collections.OrderedDict" && args.empty()) return make(Node::Dict);
  if (callable->text == "torch._utils._rebuild_parameter" && !args.empty() && args[0]->kind == Node::Tensor)
    return args[0];
  if (callable->text != "torch._utils._rebuild_tensor_v2")
    throw Refused("it calls " + callable->text + ", which is no part of a state_dict of tensors");
  if (args.size() < 4 || args[0]->kind != Node::Storage || args[1]->kind != Node::Int)
    throw Refused("a malformed _rebuild_tensor_v2");
  Value tensor = make(Node::Tensor);
  tensor->items = {args[0]};
  tensor->integer = args[1]->integer;
  tensor->size = integers(args[2], "size");
  tensor->stride = integers(args[3], "stride");
  if (tensor->size.size() != tensor->stride.size())
    throw Refused("a tensor's size and stride differ in rank");
  return tensor;
}

Value Unpickler::persistent(const Value& id) {
  const std::vector<Value>& fields = id->items;
  if (id->kind != Node::Tuple || fields.size() != 5 || fields[0]->text != "storage" ||
      fields[1]->kind != Node::Global || fields[2]->kind != Node::Str)
    throw Refused("a persistent id that is not a storage's");
  for (const auto& [name, dtype] : kStorageDtypes) {
    if (fields[1]->text != name) continue;
    Value storage = make(Node::Storage);
    storage->dtype = dtype;
    storage->text = fields[2]->text;
    return storage;
  }
  throw Refused("a storage of " + fields[1]->text + ", a dtype the coordinator's models have not");
}

// The tensor's elements, row-major and contiguous, gathered from its storage's bytes.
std::vector<std::byte> gather(const Node& tensor, std::string_view storage) {
  const size_t element = element_size(tensor.items[0]->dtype);
  uint64_t count = 1, last = uint64_t(tensor.integer), nbytes = 0;
  for (size_t d = 0; d < tensor.size.size(); ++d) {
    uint64_t reach = 0;
    if (__builtin_mul_overflow(count, uint64_t(tensor.size[d]), &count) ||
        (tensor.size[d] > 0 &&
         (__builtin_mul_overflow(uint64_t(tensor.size[d] - 1), uint64_t(tensor.stride[d]), &reach) ||
          __builtin_add_overflow(last, reach, &last))))
      throw Refused("a tensor's size or extent overflows");
  }
  if (count == 0) return {};
  if (last >= storage.size() / element) throw Refused("a tensor reaches past the end of its storage");
  if (__builtin_mul_overflow(count, element, &nbytes)) throw Refused("a tensor's byte count overflows");
  std::vector<std::byte> out(nbytes);
  std::vector<int64_t> index(tensor.size.size(), 0);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t at = uint64_t(tensor.integer);
    for (size_t d = 0; d < index.size(); ++d) at += uint64_t(index[d]) * uint64_t(tensor.stride[d]);
    std::memcpy(out.data() + i * element, storage.data() + at * element, element);
    for (size_t d = index.size(); d-- > 0 && ++index[d] == tensor.size[d];) index[d] = 0;
  }
  return out;
}

federated::Model assemble(const Value& root, const std::map<std::string, std::string_view>& records,
                          const std::string& prefix) {
  if (root->kind != Node::Dict)
    throw Refused("it holds no dict; save model.state_dict() rather than the model");
  federated::Model model;
  for (const auto& [key, value] : root->entries) {
    if (key->kind != Node::Str || value->kind != Node::Tensor)
      throw Refused("it holds a dict of other than tensors");
    try {  // a name goes into a protobuf string field, which must be UTF-8
      (void)nlohmann::json(key->text).dump();
    } catch (const nlohmann::json::type_error&) {
      throw Refused("a tensor name that is not valid UTF-8");
    }
    const Node& storage = *value->items[0];
    const auto record = records.find(prefix + "data/" + storage.text);
    if (record == records.end()) throw Refused("the record of tensor '" + key->text + "' is missing");
    const std::vector<std::byte> bytes = gather(*value, record->second);
    model.tensors.push_back(federated::copy_tensor(key->text, storage.dtype, value->size, bytes));
  }
  return model;
}

// --- Writing: the same format, as torch.save lays it out ---

void put_little_endian(std::string& out, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) out += char(uint8_t(value >> (8 * i)));
}

// The pickle of a state_dict, protocol 2, in the opcodes Unpickler reads above (and upstream's
// weights_only unpickler allows): an OrderedDict of _rebuild_tensor_v2 calls, each tensor on its
// own storage, the storage `i` of the i-th tensor.
class Pickler {
 public:
  void str(std::string_view text) {
    out_ += 'X';
    put_little_endian(out_, text.size(), 4);
    out_ += text;
  }
  void integer(uint64_t value) {
    if (value < 0x100) {
      out_ += 'K';
      put_little_endian(out_, value, 1);
    } else if (value < 0x10000) {
      out_ += 'M';
      put_little_endian(out_, value, 2);
    } else if (value < 0x80000000) {
      out_ += 'J';
      put_little_endian(out_, value, 4);
    } else {  // LONG1, 8 bytes: a two's complement int64, and these are below 2^63
      out_ += "\x8a\x08";
      put_little_endian(out_, value, 8);
    }
  }
  void global(std::string_view module, std::string_view name) {
    out_ += 'c';
    out_ += module;
    out_ += '\n';
    out_ += name;
    out_ += '\n';
  }
  void integers(const std::vector<int64_t>& values) {
    out_ += '(';
    for (int64_t value : values) integer(uint64_t(value));
    out_ += 't';
  }
  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    out_ += ")R";
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

const char* storage_type_of(ScalarType dtype) {
  for (const auto& [name, type] : kStorageDtypes)
    if (type == dtype) return name;
  throw std::runtime_error("a dtype torch.save has no storage type for here");
}

std::string state_dict_pickle(const federated::Model& model) {
  Pickler pickle;
  pickle.out() += "\x80\x02";
  pickle.empty_ordered_dict();
  pickle.out() += '(';
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const federated::NamedTensor& tensor = model.tensors[i];
    std::vector<int64_t> stride(tensor.shape.size());
    int64_t step = 1;
    for (size_t d = stride.size(); d-- > 0;) {
      stride[d] = step;
      step *= std::max<int64_t>(tensor.shape[d], 1);
    }
    pickle.str(tensor.name);
    pickle.global("torch._utils", "_rebuild_tensor_v2");
    pickle.out() += "((";  // the arguments, then the storage's persistent id
    pickle.str("storage");
    const std::string storage_type = storage_type_of(tensor.dtype);
    pickle.global("torch", storage_type.substr(storage_type.find('.') + 1));
    pickle.str(std::to_string(i));
    pickle.str("cpu");
    pickle.integer(uint64_t(tensor.numel()));
    pickle.out() += "tQ";
    pickle.integer(0);  // storage offset
    pickle.integers({tensor.shape.begin(), tensor.shape.end()});
    pickle.integers(stride);
    pickle.out() += '\x89';  // requires_grad False
    pickle.empty_ordered_dict();  // backward hooks
    pickle.out() += "tR";
  }
  pickle.out() += "u.";
  return std::move(pickle.out());
}

uint32_t crc32(std::string_view bytes) {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> entries(256);
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      entries[n] = c;
    }
    return entries;
  }();
  uint32_t c = 0xffffffffu;
  for (char byte : bytes) c = table[(c ^ uint8_t(byte)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

// A zip archive of stored records, each record's data aligned to 64 bytes by an extra field, as
// torch.save's PyTorchStreamWriter writes it (so upstream can also map the file).
class ZipWriter {
 public:
  void add(const std::string& name, std::string_view data) {
    constexpr size_t kAlignment = 64, kLocalHeaderBytes = 30, kPaddingFieldHeader = 4;
    const size_t unpadded = out_.size() + kLocalHeaderBytes + name.size() + kPaddingFieldHeader;
    const size_t padding = (kAlignment - unpadded % kAlignment) % kAlignment;
    const uint32_t checksum = crc32(data);
    const uint64_t offset = out_.size();
    if (offset + unpadded + padding + data.size() >= 0xffffffffu)
      throw std::runtime_error("the model is 4 GiB or more, past what a torch.save file without zip64 "
                               "records holds; write safetensors instead");
    put_little_endian(out_, 0x04034b50, 4);
    header_fields(out_, checksum, data.size(), name.size(), kPaddingFieldHeader + padding);
    out_ += name;
    put_little_endian(out_, 0x4246, 2);  // "FB", torch's padding field
    put_little_endian(out_, padding, 2);
    out_.append(padding, 'Z');
    out_ += data;
    put_little_endian(directory_, 0x02014b50, 4);
    put_little_endian(directory_, 0, 2);  // made by
    header_fields(directory_, checksum, data.size(), name.size(), 0);
    put_little_endian(directory_, 0, 2);  // comment length
    put_little_endian(directory_, 0, 2);  // disk
    put_little_endian(directory_, 0, 2);  // internal attributes
    put_little_endian(directory_, 0, 4);  // external attributes
    put_little_endian(directory_, offset, 4);
    directory_ += name;
    ++records_;
  }

  std::string finish() && {
    const uint64_t directory_at = out_.size();
    if (directory_at + directory_.size() >= 0xffffffffu || records_ >= 0xffff)
      throw std::runtime_error("the model is 4 GiB or more, or has 65,535 tensors or more, past what a "
                               "torch.save file without zip64 records holds; write safetensors instead");
    out_ += directory_;
    put_little_endian(out_, 0x06054b50, 4);
    put_little_endian(out_, 0, 2);  // this disk
    put_little_endian(out_, 0, 2);  // the directory's disk
    put_little_endian(out_, records_, 2);
    put_little_endian(out_, records_, 2);
    put_little_endian(out_, directory_.size(), 4);
    put_little_endian(out_, directory_at, 4);
    put_little_endian(out_, 0, 2);  // comment length
    return std::move(out_);
  }

 private:
  // From "version needed" to "extra field length", alike in local and central headers.
  static void header_fields(std::string& out, uint32_t checksum, uint64_t size, size_t name_bytes,
                            size_t extra_bytes) {
    put_little_endian(out, 20, 2);  // version needed: 2.0
    put_little_endian(out, 0, 2);   // flags
    put_little_endian(out, 0, 2);   // stored
    put_little_endian(out, 0, 2);   // time
    put_little_endian(out, 0x21, 2);  // date: 1980-01-01
    put_little_endian(out, checksum, 4);
    put_little_endian(out, size, 4);  // compressed
    put_little_endian(out, size, 4);
    put_little_endian(out, name_bytes, 2);
    put_little_endian(out, extra_bytes, 2);
  }

  std::string out_, directory_;
  uint64_t records_ = 0;
};

}  // namespace

bool is_zip_archive(std::string_view bytes) { return bytes.starts_with("PK\x03\x04"); }

bool is_legacy_torch_file(std::string_view bytes) { return bytes.starts_with("\x80\x02\x8a\x0a"); }

federated::Model decode_torch_file(std::string_view bytes, const std::string& path) {
  try {
    const std::map<std::string, std::string_view> records = zip_records(bytes);
    const auto pickle = std::find_if(records.begin(), records.end(), [](const auto& record) {
      return record.first.ends_with("/data.pkl") && record.first.find('/') == record.first.size() - 9;
    });
    if (pickle == records.end()) throw Refused("no data.pkl record: not a torch.save file");
    const std::string prefix = pickle->first.substr(0, pickle->first.size() - 8);
    const auto order = records.find(prefix + "byteorder");
    if (order != records.end() && order->second != "little") throw Refused("its tensors are big-endian");
    return assemble(Unpickler(pickle->second).run(), records, prefix);
  } catch (const Refused& error) {
    throw std::runtime_error("model: " + path +
                             ": not a torch.save file of a state_dict read here: " + error.what());
  }
}

std::string encode_torch_file(const federated::Model& model) {
  ZipWriter zip;
  zip.add("archive/data.pkl", state_dict_pickle(model));
  zip.add("archive/byteorder", "little");
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const federated::NamedTensor& tensor = model.tensors[i];
    zip.add("archive/data/" + std::to_string(i),
            {reinterpret_cast<const char*>(tensor.data.get()), tensor.nbytes});
  }
  zip.add("archive/version", "3\n");
  return std::move(zip).finish();
}

}  // namespace tn::admin
