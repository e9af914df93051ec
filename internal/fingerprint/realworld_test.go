package fingerprint_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
)

// incident is one problem as an operator sees it: the failures of it that
// clients really send (the same shape, other ids, hosts, times, values),
// and the signature they must all normalize to.
type incident struct {
	errorType string
	want      string
	messages  []string
}

// realWorld holds failures as Go, Java, Python and Node clients, gRPC,
// Postgres, MySQL, MongoDB, Kafka clients and the AWS SDKs write them. Each
// entry is one incident: its messages must share one fingerprint, and no two
// entries may share one (an error type or a plain message never collapses
// into another).
var realWorld = []incident{
	// HTTP clients: Go net/http.
	{"http.timeout", `Post "https://<host>/v<n>/charges/<uuid>": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, []string{
		`Post "https://payments.internal/v1/charges/0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
		`Post "https://payments.internal/v1/charges/4f6c1d2e-9b8a-4c3d-8e7f-1a2b3c4d5e6f": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
		`Post "https://payments.internal/v1/charges/E1B3C5D7-0A2B-4C6D-8E0F-123456789ABC": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
	}},
	{"http.timeout", `POST https://<host>/v<n>/charges/<uuid>: context deadline exceeded`, []string{
		`POST https://api/v1/charges/0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b: context deadline exceeded`,
		`POST https://api/v1/charges/7e57d004-2b97-4e7a-b45f-5387367791cd: context deadline exceeded`,
		`POST https://api/v1/charges/a3f9c2d1-5e6b-4a8c-9d0e-1f2a3b4c5d6e: context deadline exceeded`,
	}},
	{"http.error", `Get "https://<host>/api/orders/<n>?include=<v>&page=<v>": dial tcp <ip>:<port>: connect: connection refused`, []string{
		`Get "https://orders.internal:8443/api/orders/88123?include=items&page=2": dial tcp 10.0.4.12:8443: connect: connection refused`,
		`Get "https://orders.internal:8443/api/orders/90211?include=customer&page=1": dial tcp 10.0.4.13:8443: connect: connection refused`,
	}},
	{"app.not_found", `load profile user_id=<uuid>: sql: no rows in result set`, []string{
		`load profile user_id=3f1e9a7c-2b4d-4e6f-8a0b-1c2d3e4f5a6b: sql: no rows in result set`,
		`load profile user_id=0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b: sql: no rows in result set`,
	}},
	// HTTP clients: Java.
	{"org.apache.http.conn.ConnectTimeoutException", `Connect to <host>:<port> [payments.internal/<ip>] failed: connect timed out`, []string{
		`Connect to payments.internal:443 [payments.internal/10.0.2.15] failed: connect timed out`,
		`Connect to payments.internal:443 [payments.internal/10.0.2.16] failed: connect timed out`,
	}},
	{"org.springframework.web.client.ResourceAccessException", `I/O error on POST request for "https://<host>/v<n>/charges/<uuid>": Read timed out; nested exception is java.net.SocketTimeoutException: Read timed out`, []string{
		`I/O error on POST request for "https://payments.internal/v1/charges/7d3c1e2f-4a5b-4c6d-8e9f-0a1b2c3d4e5f": Read timed out; nested exception is java.net.SocketTimeoutException: Read timed out`,
		`I/O error on POST request for "https://payments.internal/v1/charges/1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e": Read timed out; nested exception is java.net.SocketTimeoutException: Read timed out`,
	}},
	{"org.springframework.web.client.HttpServerErrorException$ServiceUnavailable", `<n> Service Unavailable: [no body]`, []string{
		`503 Service Unavailable: [no body]`,
	}},
	{"feign.RetryableException", `Read timed out executing GET https://<host>/api/items/SKU-<n>?warehouse=<v>`, []string{
		`Read timed out executing GET https://inventory.internal/api/items/SKU-88231?warehouse=7`,
		`Read timed out executing GET https://inventory.internal/api/items/SKU-10442?warehouse=12`,
	}},
	{"java.net.http.HttpTimeoutException", `request timed out`, []string{`request timed out`}},
	// HTTP clients: Python.
	{"requests.exceptions.ReadTimeout", `HTTPSConnectionPool(host='api.stripe.com', port=<n>): Read timed out. (read timeout=<n>)`, []string{
		`HTTPSConnectionPool(host='api.stripe.com', port=443): Read timed out. (read timeout=30)`,
		`HTTPSConnectionPool(host='api.stripe.com', port=443): Read timed out. (read timeout=10)`,
	}},
	{"requests.exceptions.HTTPError", `<n> Server Error: Service Unavailable for url: https://<host>/v<n>/charges?customer=<v>&limit=<v>`, []string{
		`503 Server Error: Service Unavailable for url: https://api.example.com/v1/charges?customer=cus_NffrFeUfNV2Hib&limit=10`,
		`503 Server Error: Service Unavailable for url: https://api.example.com/v1/charges?customer=cus_Q3kLmPz8RtYv1W&limit=100`,
	}},
	{"requests.exceptions.ConnectionError", `HTTPSConnectionPool(host='inventory.internal', port=<n>): Max retries exceeded with url: /api/items/<n>?expand=<v> (Caused by NewConnectionError(<str>))`, []string{
		`HTTPSConnectionPool(host='inventory.internal', port=443): Max retries exceeded with url: /api/items/8812?expand=stock (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a9c0e1d90>: Failed to establish a new connection: [Errno 111] Connection refused'))`,
		`HTTPSConnectionPool(host='inventory.internal', port=443): Max retries exceeded with url: /api/items/91?expand=prices (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f1b22d4e0a0>: Failed to establish a new connection: [Errno 111] Connection refused'))`,
	}},
	// HTTP clients: Node.
	{"Error", `connect ECONNREFUSED <ip>:<port>`, []string{
		`connect ECONNREFUSED 10.0.5.9:6379`,
		`connect ECONNREFUSED 127.0.0.1:5432`,
	}},
	{"AxiosError", `Request failed with status code 503`, []string{
		`Request failed with status code 503`,
		`Request failed with status code 503`,
	}},
	{"AxiosError", `Request failed with status code 502`, []string{`Request failed with status code 502`}},
	{"FetchError", `request to https://<host>/v<n>/orders/ord_<id> failed, reason: socket hang up`, []string{
		`request to https://api.example.com/v1/orders/ord_2NfXcQ8mZp4LkT9v failed, reason: socket hang up`,
		`request to https://api.example.com/v1/orders/ord_7hGq1RxW3bN5cJ2e failed, reason: socket hang up`,
	}},
	{"Error", `getaddrinfo ENOTFOUND inventory.internal`, []string{`getaddrinfo ENOTFOUND inventory.internal`}},
	// gRPC.
	{"grpc.unavailable", `rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp <ip>:<port>: connect: connection refused"`, []string{
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.0.3.17:50051: connect: connection refused"`,
		`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 10.0.3.21:50051: connect: connection refused"`,
	}},
	{"grpc.deadline_exceeded", `rpc error: code = DeadlineExceeded desc = context deadline exceeded`, []string{
		`rpc error: code = DeadlineExceeded desc = context deadline exceeded`,
	}},
	{"grpc.not_found", `rpc error: code = NotFound desc = order <uuid> not found`, []string{
		`rpc error: code = NotFound desc = order 0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b not found`,
		`rpc error: code = NotFound desc = order 9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a not found`,
	}},
	{"grpc.resource_exhausted", `rpc error: code = ResourceExhausted desc = grpc: received message larger than max (<n> vs. <n>)`, []string{
		`rpc error: code = ResourceExhausted desc = grpc: received message larger than max (8388617 vs. 4194304)`,
		`rpc error: code = ResourceExhausted desc = grpc: received message larger than max (5242880 vs. 4194304)`,
	}},
	{"io.grpc.StatusRuntimeException", `UNAVAILABLE: io exception`, []string{`UNAVAILABLE: io exception`}},
	// Postgres.
	{"org.postgresql.util.PSQLException", `ERROR: duplicate key value violates unique constraint "payments_pkey" Detail: Key (id)=(<v>) already exists.`, []string{
		"ERROR: duplicate key value violates unique constraint \"payments_pkey\"\n  Detail: Key (id)=(0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b) already exists.",
		"ERROR: duplicate key value violates unique constraint \"payments_pkey\"\n  Detail: Key (id)=(5c2f1b9e-8a7d-4c6b-9e5f-4a3b2c1d0e9f) already exists.",
		"ERROR: duplicate key value violates unique constraint \"payments_pkey\"\n  Detail: Key (id)=(77) already exists.",
	}},
	{"org.postgresql.util.PSQLException", `ERROR: duplicate key value violates unique constraint "users_email_key" Detail: Key (email)=(<v>) already exists.`, []string{
		"ERROR: duplicate key value violates unique constraint \"users_email_key\"\n  Detail: Key (email)=(ana.souza@example.com) already exists.",
		"ERROR: duplicate key value violates unique constraint \"users_email_key\"\n  Detail: Key (email)=(j.smith+orders@example.co.uk) already exists.",
	}},
	{"pg.foreign_key", `ERROR: insert or update on table "order_items" violates foreign key constraint "order_items_order_id_fkey" (SQLSTATE 23503) DETAIL: Key (order_id, line)=(<v>) is not present in table "orders".`, []string{
		"ERROR: insert or update on table \"order_items\" violates foreign key constraint \"order_items_order_id_fkey\" (SQLSTATE 23503)\nDETAIL: Key (order_id, line)=(81234, 2) is not present in table \"orders\".",
		"ERROR: insert or update on table \"order_items\" violates foreign key constraint \"order_items_order_id_fkey\" (SQLSTATE 23503)\nDETAIL: Key (order_id, line)=(9, 14) is not present in table \"orders\".",
	}},
	{"pg.not_null", `ERROR: null value in column "amount" of relation "payments" violates not-null constraint DETAIL: Failing row contains (<v>).`, []string{
		"ERROR: null value in column \"amount\" of relation \"payments\" violates not-null constraint\nDETAIL: Failing row contains (0193a5b2-7c1e-7d3f-9a4b-2c5d6e7f8a9b, null, EUR, 2026-11-24 20:18:21.123+00).",
		"ERROR: null value in column \"amount\" of relation \"payments\" violates not-null constraint\nDETAIL: Failing row contains (41, null, USD, 2026-11-25 08:01:02+00).",
	}},
	{"pg.deadlock", `ERROR: deadlock detected (SQLSTATE 40P01) DETAIL: Process <n> waits for ShareLock on transaction <n>; blocked by process <n>. Process <n> waits for ShareLock on transaction <n>; blocked by process <n>.`, []string{
		"ERROR: deadlock detected (SQLSTATE 40P01)\nDETAIL: Process 48211 waits for ShareLock on transaction 9182731; blocked by process 48290. Process 48290 waits for ShareLock on transaction 9182729; blocked by process 48211.",
		"ERROR: deadlock detected (SQLSTATE 40P01)\nDETAIL: Process 311 waits for ShareLock on transaction 77120; blocked by process 309. Process 309 waits for ShareLock on transaction 77118; blocked by process 311.",
	}},
	{"pg.timeout", `ERROR: canceling statement due to statement timeout (SQLSTATE 57014)`, []string{
		`ERROR: canceling statement due to statement timeout (SQLSTATE 57014)`,
	}},
	{"pg.invalid_input", `ERROR: invalid input syntax for type uuid: <str> (SQLSTATE 22P02)`, []string{
		`ERROR: invalid input syntax for type uuid: "ord_8812" (SQLSTATE 22P02)`,
		`ERROR: invalid input syntax for type uuid: "" (SQLSTATE 22P02)`,
	}},
	{"pg.connect", `failed to connect to <str>: dial error (dial tcp <ip>:<port>: connect: connection refused)`, []string{
		"failed to connect to `host=db-2.prod.internal user=app database=orders`: dial error (dial tcp 10.0.4.12:5432: connect: connection refused)",
		"failed to connect to `host=db-0.prod.internal user=app database=orders`: dial error (dial tcp 10.0.4.10:5432: connect: connection refused)",
	}},
	{"psycopg2.errors.UniqueViolation", `duplicate key value violates unique constraint "users_email_key" DETAIL: Key (email)=(<v>) already exists.`, []string{
		"duplicate key value violates unique constraint \"users_email_key\"\nDETAIL:  Key (email)=(maria.silva@example.org) already exists.\n",
		"duplicate key value violates unique constraint \"users_email_key\"\nDETAIL:  Key (email)=(li.wei@example.cn) already exists.\n",
	}},
	// MySQL.
	{"mysql.duplicate", `Error 1062 (<n>): Duplicate entry <str> for key 'orders.idempotency_key'`, []string{
		`Error 1062 (23000): Duplicate entry 'a3f9c2d1-5e6b-4a8c-9d0e-1f2a3b4c5d6e' for key 'orders.idempotency_key'`,
		`Error 1062 (23000): Duplicate entry 'ik_81723' for key 'orders.idempotency_key'`,
	}},
	{"java.sql.SQLIntegrityConstraintViolationException", `Duplicate entry <str> for key 'PRIMARY'`, []string{
		`Duplicate entry '10482' for key 'PRIMARY'`,
		`Duplicate entry '7' for key 'PRIMARY'`,
	}},
	{"mysql.deadlock", `Error 1213 (<n>): Deadlock found when trying to get lock; try restarting transaction`, []string{
		`Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction`,
	}},
	{"mysql.lock_timeout", `Error 1205 (HY<n>): Lock wait timeout exceeded; try restarting transaction`, []string{
		`Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction`,
	}},
	{"mysql.no_table", `Error 1146 (<n>S<n>): Table 'shop.order_items' doesn't exist`, []string{
		`Error 1146 (42S02): Table 'shop.order_items' doesn't exist`,
	}},
	// MongoDB.
	{"MongoServerError", `E<n> duplicate key error collection: shop.orders index: _id_ dup key: { _id: ObjectId(<str>) }`, []string{
		`E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: ObjectId('65a1f0c2e4b0a1b2c3d4e5f6') }`,
		`E11000 duplicate key error collection: shop.orders index: _id_ dup key: { _id: ObjectId('65a1f0c2e4b0a1b2c3d4e5f7') }`,
	}},
	// Kafka clients.
	{"kafka.fetch", `kafka: error while consuming orders/<n>: kafka server: Request exceeded the user-specified time limit in the request`, []string{
		`kafka: error while consuming orders/7: kafka server: Request exceeded the user-specified time limit in the request`,
		`kafka: error while consuming orders/3: kafka server: Request exceeded the user-specified time limit in the request`,
	}},
	{"kafka.produce", `kafka: Failed to produce message to topic orders: kafka server: Message was too large, server rejected it to avoid allocation error.`, []string{
		`kafka: Failed to produce message to topic orders: kafka server: Message was too large, server rejected it to avoid allocation error.`,
	}},
	{"org.apache.kafka.common.errors.TimeoutException", `Expiring <n> record(s) for orders-<n>:<n> ms has passed since batch creation`, []string{
		`Expiring 12 record(s) for orders-3:120001 ms has passed since batch creation`,
		`Expiring 1 record(s) for orders-11:120017 ms has passed since batch creation`,
		`Expiring 240 record(s) for orders-0:120000 ms has passed since batch creation`,
	}},
	{"org.apache.kafka.common.errors.TimeoutException", `Topic orders not present in metadata after <n> ms.`, []string{
		`Topic orders not present in metadata after 60000 ms.`,
	}},
	{"org.apache.kafka.clients.consumer.CommitFailedException", `Offset commit cannot be completed since the consumer is not part of an active group for auto partition assignment; it is likely that the consumer was kicked out of the group.`, []string{
		`Offset commit cannot be completed since the consumer is not part of an active group for auto partition assignment; it is likely that the consumer was kicked out of the group.`,
	}},
	{"confluent_kafka.KafkaException", `KafkaError{code=_MSG_TIMED_OUT,val=<n>,str=<str>}`, []string{
		`KafkaError{code=_MSG_TIMED_OUT,val=-192,str="Local: Message timed out"}`,
	}},
	{"confluent_kafka.KafkaException", `KafkaError{code=REQUEST_TIMED_OUT,val=<n>,str=<str>}`, []string{
		`KafkaError{code=REQUEST_TIMED_OUT,val=7,str="Broker: Request timed out"}`,
	}},
	{"kafka.dial", `unable to dial: dial tcp <ip>:<port>: i/o timeout`, []string{
		`unable to dial: dial tcp 10.0.7.21:9092: i/o timeout`,
		`unable to dial: dial tcp 10.0.7.22:9092: i/o timeout`,
	}},
	{"kafka.not_leader", `NOT_LEADER_FOR_PARTITION: This server is not the leader for that topic-partition.`, []string{
		`NOT_LEADER_FOR_PARTITION: This server is not the leader for that topic-partition.`,
	}},
	// AWS SDKs: Go v2, Go v1, Java v2, Python (boto3).
	{"aws.s3", `operation error S<n>: PutObject, https response error StatusCode: 503, RequestID: <hex>, HostID: <id>, api error SlowDown: Please reduce your request rate.`, []string{
		`operation error S3: PutObject, https response error StatusCode: 503, RequestID: 4442587FB7D0A2F9, HostID: nY5FZ9vQ+1W7s0X6/Ab3kLmN8pQrS2tUvWxYz0a1B2c3D4e5F6g7H8i9J0k=, api error SlowDown: Please reduce your request rate.`,
		`operation error S3: PutObject, https response error StatusCode: 503, RequestID: 9B2C7E4F1A3D5B60, HostID: Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7Az6Y+x5W4v3U2t1S0r9Q8p7O6n5M=, api error SlowDown: Please reduce your request rate.`,
	}},
	{"aws.dynamodb", `operation error DynamoDB: PutItem, https response error StatusCode: 400, RequestID: <id>, ProvisionedThroughputExceededException: The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.`, []string{
		`operation error DynamoDB: PutItem, https response error StatusCode: 400, RequestID: 8KQ1G1VG7UJ8UDM2P1GJ8QH6JFVV4KQNSO5AEMVJF66Q9ASUAAJG, ProvisionedThroughputExceededException: The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.`,
		`operation error DynamoDB: PutItem, https response error StatusCode: 400, RequestID: R2D2C3P0Q4BB8VMQ9KJ7H1N5T0S6F3A2G8E4D9C1B7X5Z6W0Y3, ProvisionedThroughputExceededException: The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.`,
	}},
	{"aws.sqs", `operation error SQS: SendMessage, https response error StatusCode: 400, RequestID: <uuid>, api error InvalidParameterValue: Value <str> for parameter MessageGroupId is invalid. Reason: MessageGroupId is required for FIFO queues.`, []string{
		`operation error SQS: SendMessage, https response error StatusCode: 400, RequestID: 7f4e2a1b-9c3d-5e6f-8a0b-1c2d3e4f5a6b, api error InvalidParameterValue: Value '' for parameter MessageGroupId is invalid. Reason: MessageGroupId is required for FIFO queues.`,
		`operation error SQS: SendMessage, https response error StatusCode: 400, RequestID: 0c9d8e7f-6a5b-5c4d-9e3f-2a1b0c9d8e7f, api error InvalidParameterValue: Value '' for parameter MessageGroupId is invalid. Reason: MessageGroupId is required for FIFO queues.`,
	}},
	{"NoSuchKey", `NoSuchKey: The specified key does not exist. status code: 404, request id: <hex>, host id: <id>`, []string{
		"NoSuchKey: The specified key does not exist.\n\tstatus code: 404, request id: 7D3A9F1C2B4E6A80, host id: q9Vd3bK2xL7mN4pR8sT1uW6yZ0aC5eG+hJ2kM8nP4rS7tV1wX3yZ6bD9fH0jL5nQ=",
		"NoSuchKey: The specified key does not exist.\n\tstatus code: 404, request id: 1E5B8C2D4F6A9B30, host id: Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv+Wx1Yz2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0=",
	}},
	{"software.amazon.awssdk.services.s3.model.S3Exception", `Access Denied (Service: S<n>, Status Code: 403, Request ID: <hex>, Extended Request ID: <id>)`, []string{
		`Access Denied (Service: S3, Status Code: 403, Request ID: 9B2C7E4F1A3D5B60, Extended Request ID: nY5FZ9vQ+1W7s0X6/Ab3kLmN8pQrS2tUvWxYz0a1B2c3D4e5F6g7H8i9J0k=)`,
		`Access Denied (Service: S3, Status Code: 403, Request ID: 0A1B2C3D4E5F6071, Extended Request ID: Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv+Wx1Yz2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op0=)`,
	}},
	{"botocore.exceptions.ClientError", `An error occurred (ThrottlingException) when calling the PutItem operation (reached max retries: <n>): Rate of requests exceeds the allowed throughput.`, []string{
		`An error occurred (ThrottlingException) when calling the PutItem operation (reached max retries: 4): Rate of requests exceeds the allowed throughput.`,
		`An error occurred (ThrottlingException) when calling the PutItem operation (reached max retries: 9): Rate of requests exceeds the allowed throughput.`,
	}},
	{"botocore.exceptions.ClientError", `An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.`, []string{
		`An error occurred (NoSuchKey) when calling the GetObject operation: The specified key does not exist.`,
	}},
	{"botocore.exceptions.ClientError", `An error occurred (AccessDenied) when calling the PutObject operation: Access Denied`, []string{
		`An error occurred (AccessDenied) when calling the PutObject operation: Access Denied`,
	}},
	// Application errors: emails, tokens, ULIDs, hex ids, paths.
	{"smtp.rejected", `smtp: <n> <n> <<email>>: Recipient address rejected: User unknown in virtual mailbox table`, []string{
		`smtp: 550 5.1.1 <john.doe@example.com>: Recipient address rejected: User unknown in virtual mailbox table`,
		`smtp: 550 5.1.1 <a.b-c_d@mail.example.org>: Recipient address rejected: User unknown in virtual mailbox table`,
	}},
	{"validation.duplicate_email", `validate customer: email=<email> is already registered`, []string{
		`validate customer: email=ana.souza+promo@example.com.br is already registered`,
		`validate customer: email=bob@example.com is already registered`,
	}},
	{"stripe.invalid_request", `No such customer: <str>; code: resource_missing; request-id: req_<id>`, []string{
		`No such customer: 'cus_NffrFeUfNV2Hib'; code: resource_missing; request-id: req_WBvdUgnOMKnHkT`,
		`No such customer: 'cus_Q3kLmPz8RtYv1W'; code: resource_missing; request-id: req_8cJz2QpW4xNv7L`,
	}},
	{"job.lease_expired", `job <id>: lease expired after <duration>`, []string{
		`job 01HQZX3J5K8W2N7M4P6R9T0V1Y: lease expired after 30s`,
		`job 01ARZ3NDEKTSV4RRFFQ69G5FAV: lease expired after 1m0s`,
	}},
	{"auth.expired", `invalid token <id>.<id>.<id>: token is expired`, []string{
		`invalid token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U: token is expired`,
		`invalid token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI5ODc2NTQzMjEwIn0.Xk7pQ2mW9rT4vY1bN6cZ3hJ8sL5dF0gA2eR7uI4oP9w: token is expired`,
	}},
	{"storage.not_found", `object <hex> not found in bucket "invoices"`, []string{
		`object 507f1f77bcf86cd799439011 not found in bucket "invoices"`,
		`object 65a1f0c2e4b0a1b2c3d4e5f6 not found in bucket "invoices"`,
	}},
	{"storage.not_found", `object <hex> not found in bucket "receipts"`, []string{
		`object 507f1f77bcf86cd799439011 not found in bucket "receipts"`,
	}},
	{"io.not_found", `open /var/lib/app/uploads/<hex>/<time>/invoice-<n>.pdf: no such file or directory`, []string{
		`open /var/lib/app/uploads/7f3c2a/2026-11-24/invoice-88213.pdf: no such file or directory`,
		`open /var/lib/app/uploads/e91b04/2026-11-25/invoice-1.pdf: no such file or directory`,
	}},
	// Python and Java bugs: the name in quotes is the bug.
	{"KeyError", `KeyError: 'customer_id'`, []string{`KeyError: 'customer_id'`, `KeyError: 'customer_id'`}},
	{"KeyError", `KeyError: 'amount'`, []string{`KeyError: 'amount'`}},
	{"AttributeError", `'NoneType' object has no attribute 'get'`, []string{`'NoneType' object has no attribute 'get'`}},
	{"AttributeError", `'NoneType' object has no attribute 'items'`, []string{`'NoneType' object has no attribute 'items'`}},
	{"java.lang.NullPointerException", `Cannot invoke "String.length()" because "<local<n>>" is null`, []string{
		`Cannot invoke "String.length()" because "<local1>" is null`,
		`Cannot invoke "String.length()" because "<local4>" is null`,
	}},
	{"java.lang.NullPointerException", `Cannot invoke "com.acme.Order.getCustomer()" because "order" is null`, []string{
		`Cannot invoke "com.acme.Order.getCustomer()" because "order" is null`,
	}},
	{"validation.invalid", `validation failed: field "amount" must be positive, got <n>`, []string{
		`validation failed: field "amount" must be positive, got -5`,
		`validation failed: field "amount" must be positive, got -0.01`,
	}},
	{"validation.invalid", `validation failed: field "currency" must be positive, got <n>`, []string{
		`validation failed: field "currency" must be positive, got 0`,
	}},
	// Plain English: words are never placeholders.
	{"payment.declined", `payment declined: insufficient funds`, []string{`payment declined: insufficient funds`}},
	{"payment.declined", `payment declined: card expired`, []string{`payment declined: card expired`}},
	{"payment.declined", `payment declined: do not honor`, []string{`payment declined: do not honor`}},
	{"schema.invalid", `can't decode order: doesn't match schema 'orders-value' version <n>`, []string{
		`can't decode order: doesn't match schema 'orders-value' version 7`,
		`can't decode order: doesn't match schema 'orders-value' version 12`,
	}},
}

// Every real-world message normalizes to its incident's signature, the
// messages of an incident share one fingerprint, and the incidents are as
// many as the table's entries: none merges into another.
func TestRealWorldFailuresFormTheirIncidents(t *testing.T) {
	messages := 0
	byFP := map[string]int{} // fingerprint → the entry that has it
	for i, in := range realWorld {
		for _, m := range in.messages {
			messages++
			if got := fingerprint.Normalize(m); got != in.want {
				t.Errorf("%s: Normalize(%q)\n got %q\nwant %q", in.errorType, m, got, in.want)
			}
			fp := fingerprint.Of(in.errorType, m, nil)
			if j, ok := byFP[fp]; ok && j != i {
				t.Errorf("%q (%s) shares fingerprint %s with %q: different problems merged", m, in.errorType, fp, realWorld[j].want)
			}
			byFP[fp] = i
		}
	}
	if messages < 100 {
		t.Errorf("the table holds %d messages, want at least 100", messages)
	}
	// Under the first rules these messages formed 102 incidents.
	if len(byFP) != len(realWorld) || len(realWorld) != 74 {
		t.Errorf("%d messages form %d incidents, want the table's %d (74)", messages, len(byFP), len(realWorld))
	}
}

// isRandomTokenCases: generated ids a message may hold, and identifiers
// that look a bit like them but name things (an error type, a class, a
// collation) and must stay.
func TestRandomTokensButNotIdentifiers(t *testing.T) {
	for _, id := range []string{
		"cus_NffrFeUfNV2Hib", "ch_3MqLx2LkdIwHu7ix0snN0B15", "pi_3MtwBwLkdIwHu7ix28a3tqPa", "req_WBvdUgnOMKnHkT",
		"V1StGXR8_Z5jdHi6B-myT", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "8KQ1G1VG7UJ8UDM2P1GJ8QH6JFVV4KQNSO5AEMVJF66Q9ASUAAJG",
		"k3j4h5g6f7d8s9a0", "dGhpcyBpcyBhIHRva2Vu",
	} {
		if got := fingerprint.Normalize("token " + id); !strings.Contains(got, "<id>") {
			t.Errorf("Normalize(token %s) = %q: the id was not recognized", id, got)
		}
	}
	for _, word := range []string{
		"S3Exception", "Http2Exception", "Log4j2Config", "OAuth2Client", "Base64Decoder", "getUser2ById",
		"utf8mb4_unicode_ci", "latin1_swedish_ci", "NOT_LEADER_OR_FOLLOWER", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"ProvisionedThroughputExceededException", "HTTPSConnectionPool", "IsNotOwnedByMe", "KeyTooLongError",
		"ListenerExecutionFailedException", "sha256WithRSAEncryption", "Content-Type", "user-specified",
	} {
		if got := fingerprint.Normalize(word); strings.Contains(got, "<id>") || strings.Contains(got, "<hex>") {
			t.Errorf("Normalize(%s) = %q: an identifier became a placeholder", word, got)
		}
	}
}
