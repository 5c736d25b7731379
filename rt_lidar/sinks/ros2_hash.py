"""ROS 2 type hashes (REP-2011 ``RIHS01``) of the ``ros2`` sink's DDS types, and the USER_DATA that
rmw_cyclonedds_cpp puts on participants and endpoints.

Since Iron, every ROS 2 endpoint announces the hash of its message type in its DDS USER_DATA QoS as
``typehash=RIHS01_<sha256>;`` (rmw_dds_common's ``encode_type_hash_for_user_data_qos``), and every
participant ``enclave=/;`` (rmw_cyclonedds_cpp's ``rmw_context_impl_s::init``). ``ros2 topic info -v``
shows the hash; a node on another distro compares it to its own.

The hash (rosidl_generator_type_description, REP-2011): sha256 over the JSON (``json.dumps`` with its
default separators ``", "`` and ``": "``, no sorting of keys) of::

    {"type_description": {"type_name": "pkg/msg/Name", "fields": [FIELD, ...]},
     "referenced_type_descriptions": [every nested type, recursively, sorted by type_name]}

    FIELD = {"name": ..., "type": {"type_id": ..., "capacity": ..., "string_capacity": ...,
                                   "nested_type_name": ...}}

with the ``type_description_interfaces/msg/FieldType`` ids (uint8 3, int32 6, uint32 7, float64 11, char 13,
bool 15, string 17, bounded string 21, a nested type 1; a fixed array adds 48, a bounded sequence
96, an unbounded one 144). Comments, constants and default values are not hashed. The description
is read from our Cyclone DDS IDL structs themselves (:mod:`rt_lidar.sinks.ros2_types`), so a member
that differs from the ``.msg`` changes the hash and the tests, which pin the hashes ROS 2 generates
(rcl's ``test_type_hash.cpp``), fail.
"""

from __future__ import annotations

import hashlib
import json
import typing
from typing import Any

__all__ = ["endpoint_user_data", "participant_user_data", "ros_type_name", "type_description", "type_hash"]

FIELD_TYPE_IDS = {
    "int8": 2,
    "uint8": 3,
    "int16": 4,
    "uint16": 5,
    "int32": 6,
    "uint32": 7,
    "int64": 8,
    "uint64": 9,
    "float32": 10,
    "float64": 11,
    "char": 13,
    "bool": 15,
    "string": 17,
}
"""``type_description_interfaces/msg/FieldType`` ids of the primitive types our structs use."""
NESTED_TYPE = 1
BOUNDED_STRING = 21
FIXED_ARRAY = 48
"""Added to the element's id for a fixed array (``T[N]``)."""
UNBOUNDED_SEQUENCE = 144
"""Added to the element's id for an unbounded sequence (``T[]``)."""
BOUNDED_SEQUENCE = 96
"""Added to the element's id for a bounded sequence (``T[<=N]``)."""


def ros_type_name(cls: type) -> str:
    """``pkg::msg::dds_::Name_`` (the struct's DDS type name) -> ``pkg/msg/Name``."""
    dds: str = cls.__idl_typename__  # type: ignore[attr-defined]
    parts = dds.split("::")
    if len(parts) != 4 or parts[2] != "dds_" or not parts[3].endswith("_"):
        raise ValueError(f"{dds}: not a ROS 2 DDS type name (pkg::msg::dds_::Name_)")
    return f"{parts[0]}/{parts[1]}/{parts[3][:-1]}"


def _field_type(annotation: Any, nested: dict[str, type]) -> dict[str, Any]:
    """The FieldType dict of one member annotation (primitives, strings, bounded strings, structs;
    alone, in a fixed array, a bounded or an unbounded sequence)."""
    capacity, offset, string_capacity = 0, 0, 0
    args = typing.get_args(annotation)
    holder = args[1] if typing.get_origin(annotation) is typing.Annotated and len(args) > 1 else None
    if holder is not None and hasattr(holder, "subtype"):  # cyclonedds array / sequence holders
        if hasattr(holder, "length"):  # array[T, N]: T[N]
            offset, capacity = FIXED_ARRAY, int(holder.length)
        else:  # sequence[T] / sequence[T, N]: T[] / T[<=N]
            max_len = getattr(holder, "max_length", None)
            offset, capacity = (BOUNDED_SEQUENCE, int(max_len)) if max_len else (UNBOUNDED_SEQUENCE, 0)
        annotation = holder.subtype
        args = typing.get_args(annotation)
    name = ""
    bounded = args[1] if typing.get_origin(annotation) is typing.Annotated and len(args) > 1 else None
    if bounded is not None and hasattr(bounded, "max_length"):  # bounded_str[N]: string<=N
        tid, string_capacity = BOUNDED_STRING, int(bounded.max_length)
    elif typing.get_origin(annotation) is typing.Annotated and isinstance(args[1], str):
        tid = FIELD_TYPE_IDS[args[1]]  # cyclonedds primitives: Annotated[int, 'uint32']
    elif annotation is bool:
        tid = FIELD_TYPE_IDS["bool"]
    elif annotation is str:
        tid = FIELD_TYPE_IDS["string"]
    elif isinstance(annotation, type) and hasattr(annotation, "__idl_typename__"):
        tid, name = NESTED_TYPE, ros_type_name(annotation)
        nested[name] = annotation
    else:
        raise TypeError(f"no ROS 2 field type for {annotation!r}")
    return {
        "type_id": tid + offset,
        "capacity": capacity,
        "string_capacity": string_capacity,
        "nested_type_name": name,
    }


def _struct(cls: type, nested: dict[str, type]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [{"name": n, "type": _field_type(hints[n], nested)} for n in cls.__dataclass_fields__]  # type: ignore[attr-defined]
    return {"type_name": ros_type_name(cls), "fields": fields}


def type_description(cls: type) -> dict[str, Any]:
    """The hashed part of ``type_description_interfaces/msg/TypeDescription`` of the struct ``cls``."""
    nested: dict[str, type] = {}
    main = _struct(cls, nested)
    refs: dict[str, dict[str, Any]] = {}
    while len(refs) < len(nested):
        for name, sub in list(nested.items()):
            if name not in refs:
                refs[name] = _struct(sub, nested)
    return {"type_description": main, "referenced_type_descriptions": [refs[k] for k in sorted(refs)]}


def type_hash(cls: type) -> str:
    """``RIHS01_<sha256 hex>`` of the struct ``cls`` (REP-2011), as ``ros2 topic info -v`` shows it."""
    text = json.dumps(type_description(cls), ensure_ascii=True, separators=(", ", ": "), sort_keys=False)
    return "RIHS01_" + hashlib.sha256(text.encode()).hexdigest()


def endpoint_user_data(cls: type) -> bytes:
    """The USER_DATA of a writer or reader of ``cls`` (``typehash=RIHS01_...;``)."""
    return f"typehash={type_hash(cls)};".encode()


def participant_user_data(enclave: str = "/") -> bytes:
    """The USER_DATA of a ROS 2 participant (``enclave=/;``)."""
    return f"enclave={enclave};".encode()
