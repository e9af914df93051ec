"""A stand-in for fastavro, which Debian does not package, over Apache Avro.

confluent-kafka-python's AvroSerializer imports parse_schema and
schemaless_writer from fastavro. Here the body is written by the Apache
Avro project's own Python implementation (python3-avro): the header and
registration stay Confluent's code, the Avro encoding Apache's.
"""
import json

import avro.io
import avro.schema

__all__ = ["parse_schema", "schemaless_writer", "schemaless_reader"]


class _Parsed(dict):
    """The schema dict, as fastavro returns it, carrying Apache's schema."""


def parse_schema(schema):
    p = _Parsed(schema)
    p.apache = avro.schema.parse(json.dumps(schema))
    name = getattr(p.apache, "fullname", None)
    if name:
        p["name"] = name
    return p


def schemaless_writer(fo, schema, record):
    avro.io.DatumWriter(schema.apache).write(record, avro.io.BinaryEncoder(fo))


def schemaless_reader(fo, writer_schema, reader_schema=None):
    r = avro.io.DatumReader(writer_schema.apache, (reader_schema or writer_schema).apache)
    return r.read(avro.io.BinaryDecoder(fo))
