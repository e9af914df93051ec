#!/usr/bin/env python3
"""Serialize test records with Confluent's own Python serializers.

Used by internal/schema's confluent_test.go: a real Confluent serializer
(confluent-kafka-python's AvroSerializer, ProtobufSerializer and
JSONSerializer, v1.7 API in confluent_kafka.schema_registry) writes the wire
format against the test's registry; nothing here encodes a value itself.

stdin: {"url": REGISTRY_URL, "cases": [CASE, ...]} where CASE is
  {"name", "format": "AVRO", "topic", "schema": AVRO_TEXT, "value": V}
  {"name", "format": "JSON", "topic", "schema": JSON_SCHEMA_TEXT, "value": V}
  {"name", "format": "PROTOBUF", "topic", "files": [BASE64 FileDescriptorProto,
   ... in dependency order], "message": FULL_NAME, "value": PROTO3_JSON}
An Avro value's non-JSON types are tagged objects: {"$bytes": BASE64},
{"$decimal": "12.30"}, {"$datetime": RFC3339}, {"$date": "YYYY-MM-DD"}.

stdout: one JSON line per case, {"name": ..., "hex": WIRE_BYTES_HEX}.
"""
import base64
import datetime
import decimal
import json
import os
import sys

try:
    import fastavro  # noqa: F401  what AvroSerializer imports
except ImportError:
    # Debian ships no fastavro: stand it in with Apache Avro's writer.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fastavro_shim"))

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
# The well-known types, so that files importing them resolve.
from google.protobuf import timestamp_pb2, duration_pb2, struct_pb2, wrappers_pb2, any_pb2, empty_pb2  # noqa: F401


def avro_value(v):
    if isinstance(v, list):
        return [avro_value(x) for x in v]
    if isinstance(v, dict):
        if len(v) == 1:
            (k, x), = v.items()
            if k == "$bytes":
                return base64.b64decode(x)
            if k == "$decimal":
                return decimal.Decimal(x)
            if k == "$datetime":
                return datetime.datetime.fromisoformat(x.replace("Z", "+00:00"))
            if k == "$date":
                return datetime.date.fromisoformat(x)
        return {k: avro_value(x) for k, x in v.items()}
    return v


def proto_class(pool, factory, case):
    for b64 in case["files"]:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(b64))
        try:
            pool.FindFileByName(fdp.name)
        except KeyError:
            pool.Add(fdp)
    return factory.GetPrototype(pool.FindMessageTypeByName(case["message"]))


def main():
    spec = json.load(sys.stdin)
    client = SchemaRegistryClient({"url": spec["url"]})
    pool = descriptor_pool.Default()
    factory = message_factory.MessageFactory(pool)
    for case in spec["cases"]:
        ctx = SerializationContext(case.get("topic", "t"), MessageField.VALUE)
        fmt = case["format"]
        if fmt == "AVRO":
            out = AvroSerializer(client, case["schema"])(avro_value(case["value"]), ctx)
        elif fmt == "JSON":
            out = JSONSerializer(case["schema"], client)(case["value"], ctx)
        elif fmt == "PROTOBUF":
            cls = proto_class(pool, factory, case)
            msg = json_format.ParseDict(case["value"], cls())
            out = ProtobufSerializer(cls, client)(msg, ctx)
        else:
            raise ValueError("case %s: unknown format %r" % (case["name"], fmt))
        print(json.dumps({"name": case["name"], "hex": out.hex()}), flush=True)


if __name__ == "__main__":
    main()
