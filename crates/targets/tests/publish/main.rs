//! Each publisher against its real server (NATS with JetStream, Redis, RabbitMQ, and moto's
//! AWS emulator), all started by `scripts/with-buses`: delivered with the documented attributes,
//! a transient failure retried with the same delivery id, a permanent one given up.

mod amqp;
mod aws;
mod nats;
mod redis;
mod support;
