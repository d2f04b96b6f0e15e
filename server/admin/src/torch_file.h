// The state_dict in a torch.save file, for create-task --model and fetch-model: the zip format torch.save has
// written by default since torch 1.6 (an archive of stored records: data.pkl, the pickled
// {name: tensor}, and data/KEY, each storage's little-endian bytes). Only what a state_dict
// pickles is understood (OrderedDict, _rebuild_tensor_v2, _rebuild_parameter, the storages'
// persistent ids); anything else is refused by name, so no pickled code is ever run.
#pragma once

#include <string>
#include <string_view>

#include "federated/model.h"

namespace tn::admin {

// Whether `bytes` start as a torch.save file does: a zip archive, or the legacy format's pickle
// of its magic number.
bool is_zip_archive(std::string_view bytes);
bool is_legacy_torch_file(std::string_view bytes);

// The tensors of the state_dict in `bytes` (a torch.save zip file), in its order, each made
// contiguous (views of one storage become separate tensors). Throws std::runtime_error naming
// `path` for a compressed or zip64 archive, a missing record, a pickle holding anything but a
// dict of tensors, a dtype the coordinator has not, and a view reaching past its storage.
federated::Model decode_torch_file(std::string_view bytes, const std::string& path);

// The torch.save file of `model` as a state_dict (an OrderedDict of {name: tensor}, in the
// model's order, each tensor contiguous on its own storage), as torch.save writes one: what
// upstream's torch.load (weights_only too) and decode_torch_file read. Throws std::runtime_error
// for a model of 4 GiB or more, which would need zip64 records (safetensors has no such limit).
std::string encode_torch_file(const federated::Model& model);

}  // namespace tn::admin
