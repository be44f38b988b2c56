# SPDX-License-Identifier: MIT
"""An independent reader of TensorBoard event files for the tests: TFRecord framing with its
own CRC32C, and protobuf classes built with python3-protobuf from TensorFlow's official message
and field definitions (tensorflow/core/util/event.proto, framework/summary.proto), not from
gpumon's .proto file."""
import struct

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _classes():
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="tf_event_test.proto", package="tensorflow", syntax="proto3")
    summ = fd.message_type.add(name="Summary")
    val = summ.nested_type.add(name="Value")
    val.oneof_decl.add(name="value")
    val.field.add(name="node_name", number=7, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    val.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    val.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    summ.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                   type_name=".tensorflow.Summary.Value")
    ev = fd.message_type.add(name="Event")
    ev.oneof_decl.add(name="what")
    ev.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    ev.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    ev.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    ev.field.add(name="graph_def", number=4, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL, oneof_index=0)
    ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL, oneof_index=0,
                 type_name=".tensorflow.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    d = pool.FindMessageTypeByName("tensorflow.Event")
    get = getattr(message_factory, "GetMessageClass", None)
    return get(d) if get else message_factory.MessageFactory(pool).GetPrototype(d)


Event = _classes()


def records(path):
    """The data of each record, checking both CRCs; raises AssertionError on a bad frame."""
    data = open(path, "rb").read()
    out, i = [], 0
    while i < len(data):
        assert i + 12 <= len(data), "truncated header"
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[i + 8:i + 12])
        assert hcrc == masked(head), f"bad length CRC at offset {i}"
        body = data[i + 12:i + 12 + n]
        (dcrc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert len(body) == n and dcrc == masked(body), f"bad data CRC at offset {i}"
        out.append(body)
        i += 16 + n
    return out


def events(path):
    evs = []
    for body in records(path):
        e = Event()
        e.ParseFromString(body)
        evs.append(e)
    return evs


def scalars(path):
    """{tag: [(step, wall_time, value), ...]} of the file's scalar events."""
    out = {}
    for e in events(path):
        if e.WhichOneof("what") == "summary":
            for v in e.summary.value:
                out.setdefault(v.tag, []).append((e.step, e.wall_time, v.simple_value))
    return out
