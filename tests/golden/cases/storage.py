"""Storages under tensors: UntypedStorage, TypedStorage and the legacy classes, set_/resize_,
the legacy constructors, and what upstream builds on them (deepcopy, pickling, legacy save).

Each case returns plain values (byte lists, tensors, shapes) so both sides encode alike."""

import copy
import io
import pickle

import torch

from spec import Arg, Case


def round_trip_legacy(value):
    buffer = io.BytesIO()
    torch.save(value, buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    return torch.load(buffer)


def shares_memory(a, b):
    a.view(-1)[0] = 7
    return b.view(-1)[0].item()


def truncated_legacy_load():
    buffer = io.BytesIO()
    torch.save(torch.arange(100.), buffer, _use_new_zipfile_serialization=False)
    return torch.load(io.BytesIO(buffer.getvalue()[:-40]))


def sliced_then_written():
    s = torch.UntypedStorage([1, 2, 3, 4, 5])
    window = s[1:4]
    window[0] = 99
    return list(s), list(window), window.nbytes()


def typed_view_of_tensor(a):
    typed = a.storage()
    return typed.dtype, typed.size(), typed.tolist(), typed[1], len(typed.untyped())


VARIANTS = (
    # UntypedStorage itself
    ("untyped/from_list", lambda: list(torch.UntypedStorage([1, 2, 255])), ()),
    ("untyped/wraps_mod_256", lambda: list(torch.UntypedStorage([256, -1, 513])), ()),
    ("untyped/size_and_len", lambda: (torch.UntypedStorage(5).nbytes(), len(torch.UntypedStorage(5)),
                                      torch.UntypedStorage(5).size(), torch.UntypedStorage(5).element_size()), ()),
    ("untyped/empty", lambda: (torch.UntypedStorage().nbytes(), list(torch.UntypedStorage())), ()),
    ("untyped/bad_float_size", lambda: torch.UntypedStorage(4.5), ()),
    ("untyped/bad_items", lambda: torch.UntypedStorage("ab"), ()),
    ("untyped/device", lambda: str(torch.UntypedStorage(2, device="cpu").device), ()),
    ("untyped/index", lambda: (lambda s: (s[0], s[-1], s[2]))(torch.UntypedStorage([5, 6, 7])), ()),
    ("untyped/index_out_of_range", lambda: torch.UntypedStorage(4)[9], ()),
    ("untyped/negative_out_of_range", lambda: torch.UntypedStorage(4)[-5], ()),
    ("untyped/slice_step", lambda: torch.UntypedStorage(4)[0:4:2], ()),
    ("untyped/slice_shares", sliced_then_written, ()),
    ("untyped/setitem_slice", lambda: (lambda s: (s.__setitem__(slice(1, 3), 7), list(s))[1])(
        torch.UntypedStorage([1, 2, 3, 4])), ()),
    ("untyped/fill", lambda: list(torch.UntypedStorage(4).fill_(3)), ()),
    ("untyped/resize_grow_keeps", lambda: list(torch.UntypedStorage([1, 2]).resize_(3))[:2], ()),
    ("untyped/resize_shrink", lambda: list(torch.UntypedStorage([1, 2, 3]).resize_(2)), ()),
    ("untyped/copy", lambda: list(torch.UntypedStorage(3).copy_(torch.UntypedStorage([4, 5, 6]))), ()),
    ("untyped/copy_size_mismatch", lambda: torch.UntypedStorage(4).copy_(torch.UntypedStorage(3)), ()),
    ("untyped/clone_is_copy", lambda: (lambda s, c: (c.__setitem__(0, 9), list(s), list(c))[1:])(
        *(lambda s: (s, s.clone()))(torch.UntypedStorage([1, 2]))), ()),
    ("untyped/tolist", lambda: torch.UntypedStorage([3, 4]).tolist(), ()),
    ("untyped/is_pinned_shared", lambda: (torch.UntypedStorage(2).is_pinned(), torch.UntypedStorage(2).is_shared()), ()),
    # from_buffer
    ("from_buffer/uint8", lambda: list(torch.UntypedStorage.from_buffer(b"abc", dtype=torch.uint8)), ()),
    ("from_buffer/no_dtype", lambda: torch.UntypedStorage.from_buffer(b"abc"), ()),
    ("from_buffer/needs_byte_order", lambda: torch.UntypedStorage.from_buffer(b"abcd", dtype=torch.int16), ()),
    ("from_buffer/big", lambda: list(torch.UntypedStorage.from_buffer(b"abcd", "big", dtype=torch.int16)), ()),
    ("from_buffer/little", lambda: list(torch.UntypedStorage.from_buffer(b"abcd", "little", dtype=torch.int16)), ()),
    ("from_buffer/not_multiple", lambda: torch.UntypedStorage.from_buffer(b"abcde", "little", dtype=torch.int16), ()),
    ("from_buffer/count_offset", lambda: list(torch.UntypedStorage.from_buffer(
        b"abcde", "little", count=2, offset=1, dtype=torch.int16)), ()),
    ("from_buffer/count_too_big", lambda: torch.UntypedStorage.from_buffer(
        b"abcde", "little", count=3, offset=1, dtype=torch.int16), ()),
    ("from_buffer/offset_too_big", lambda: torch.UntypedStorage.from_buffer(b"abcde", "little", offset=6,
                                                                             dtype=torch.int16), ()),
    ("from_buffer/bad_order", lambda: torch.UntypedStorage.from_buffer(b"ab", "middle", dtype=torch.int16), ()),
    ("from_buffer/legacy_float", lambda: torch.FloatStorage.from_buffer(b"\0\0\x80\x3f\0\0\0\x40", "little").tolist(),
     ()),
    ("from_buffer/legacy_byte", lambda: torch.ByteStorage.from_buffer(b"xyz").tolist(), ()),
    # typed storages over tensors
    ("typed/of_float_tensor", typed_view_of_tensor, (Arg((2, 3)),)),
    ("typed/of_int16_tensor", typed_view_of_tensor, (Arg((2, 3), dtype="int16"),)),
    ("typed/of_view_is_whole_storage", lambda a: a[1:, 1:].storage().size(), (Arg((3, 4)),)),
    ("typed/storage_type", lambda a: a.storage_type().__name__, (Arg((2,), dtype="int64"),)),
    ("typed/cast_double", lambda a: a.storage().double().tolist(), (Arg((2, 2)),)),
    ("typed/legacy_sized", lambda: torch.FloatStorage(3).size(), ()),
    ("typed/legacy_from_list", lambda: torch.LongStorage([1, 2, 3]).tolist(), ()),
    ("typed/writes_reach_tensor", lambda a: (a.storage().__setitem__(0, 5.0), a)[1], (Arg((2, 2)),)),
    # set_ and resize_
    ("set_/untyped", lambda a: a.set_(torch.UntypedStorage(8)).shape, (Arg((2,)),)),
    ("set_/untyped_floor", lambda a: a.set_(torch.UntypedStorage(7)).shape, (Arg((2,)),)),
    ("set_/offset_size_grows", lambda a: (lambda s: (a.set_(s, 1, (3,)).shape, s.nbytes()))(
        torch.UntypedStorage(8)), (Arg((2,)),)),
    ("set_/strided", lambda a, b: b.set_(a.storage(), 1, (2, 2), (1, 2)), (Arg((3, 3)), Arg((1,)))),
    ("set_/typed_wrong_dtype", lambda a: a.set_(torch.ByteStorage.from_buffer(b"xyz")), (Arg((2,)),)),
    ("set_/tensor", lambda a, b: b.set_(a), (Arg((2, 3)), Arg((1,)))),
    ("set_/empty", lambda a: a.set_().shape, (Arg((2, 3)),)),
    ("set_/shares_memory", lambda a: shares_memory(a, torch.tensor([]).set_(a.storage())), (Arg((2, 2)),)),
    ("set_/negative_offset", lambda a: a.set_(a.storage(), -1, (1,)), (Arg((2,)),)),
    ("set_/size_stride_mismatch", lambda a: a.set_(a.storage(), 0, (2,), (1, 1)), (Arg((2,)),)),
    ("is_set_to/same", lambda a: a.is_set_to(torch.tensor([]).set_(a)), (Arg((2,)),)),
    ("is_set_to/other", lambda a, b: a.is_set_to(b), (Arg((2,)), Arg((2,)))),
    ("resize_/grow_keeps_prefix", lambda a: a.resize_(2, 3)[0], (Arg((3,)),)),
    ("resize_/shrink", lambda a: a.resize_(2), (Arg((2, 3)),)),
    ("resize_/tensor_size", lambda a: a.resize_(torch.tensor([4])).shape, (Arg((2,)),)),
    ("resize_/negative", lambda a: a.resize_(-1), (Arg((2,)),)),
    ("resize_/preserve_format", lambda a: a.resize_(2, memory_format=torch.preserve_format), (Arg((2,)),)),
    ("resize_/grows_storage_shared", lambda a: (lambda b: (a.resize_(6), b.storage().size())[1])(
        torch.tensor([]).set_(a)), (Arg((2,)),)),
    # legacy constructors
    ("legacy/byte_from_storage", lambda: torch.ByteTensor(torch.ByteStorage.from_buffer(b"xyz")), ()),
    ("legacy/float_from_byte_storage", lambda: torch.FloatTensor(torch.ByteStorage.from_buffer(b"xyz")), ()),
    ("legacy/float_from_untyped", lambda: torch.FloatTensor(torch.UntypedStorage(8)).shape, ()),
    ("legacy/sizes", lambda: (torch.FloatTensor(2, 3).shape, torch.LongTensor(torch.Size([4])).shape), ()),
    ("legacy/data", lambda: (torch.FloatTensor([1, 2]), torch.IntTensor([[1, 2]]), torch.DoubleTensor()), ()),
    ("legacy/from_tensor", lambda a: torch.FloatTensor(a), (Arg((2,)),)),
    ("legacy/from_tensor_wrong_dtype", lambda a: torch.FloatTensor(a), (Arg((2,), dtype="int64"),)),
    ("legacy/not_a_sequence", lambda: torch.FloatTensor(2.5), ()),
    ("legacy/tensor_class_from_storage", lambda: torch.Tensor(torch.UntypedStorage(8)).shape, ()),
    ("legacy/new_from_storage", lambda a: a.new(torch.UntypedStorage(16)).shape, (Arg((2,), dtype="int64"),)),
    ("legacy/new_sizes", lambda a: (a.new(2, 2).shape, a.new(2, 2).dtype), (Arg((2,), dtype="int32"),)),
    ("legacy/isinstance", lambda a: (isinstance(a, torch.FloatTensor), isinstance(a, torch.LongTensor),
                                     type(torch.FloatTensor).__name__, torch.LongTensor.dtype,
                                     torch.HalfTensor in torch._tensor_classes), (Arg((2,)),)),
    # what upstream builds on storages
    ("deepcopy/tensor", lambda a: copy.deepcopy(a), (Arg((2, 3)),)),
    ("deepcopy/views_stay_shared", lambda a: (lambda c: shares_memory(c[0], c[1]))(copy.deepcopy([a, a[1]])),
     (Arg((2, 3)),)),
    ("pickle/view", lambda a: pickle.loads(pickle.dumps(a[:, 1:])), (Arg((2, 3)),)),
    ("pickle/int64", lambda a: pickle.loads(pickle.dumps(a)), (Arg((3,), dtype="int64"),)),
    ("legacy_save/dict", lambda a: round_trip_legacy({"w": a, "row": a[1]}), (Arg((2, 3)),)),
    ("legacy_save/truncated", truncated_legacy_load, ()),
)


def cases():
    for variant, fn, args in VARIANTS:
        yield Case("storage/" + variant, fn, args, "float32", exact=True)
