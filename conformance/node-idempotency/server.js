'use strict';
// A minimal payments endpoint behind @node-idempotency/nestjs 1.0.4 on NestJS 10.4.22
// (conformance/, issue 29). Plain JavaScript: the decorators the package's README writes with
// TypeScript syntax (@Module, @Controller, @Post, @Idempotent …) are applied by hand with
// Reflect.decorate, which is what TypeScript compiles them to. No build step.
// The @Idempotent() decorator guards POST /v1/payments only.
// STORE=memory (the package's memory adapter) or STORE=redis (its Redis adapter, REDIS_URL required).
require('reflect-metadata');
const { NestFactory } = require('@nestjs/core');
const {
  Module, Controller, Get, Post, Body, Query, HttpCode, BadRequestException,
} = require('@nestjs/common');
const { NodeIdempotencyModule, Idempotent, StorageAdapterEnum } = require('@node-idempotency/nestjs');

function fail(msg) {
  console.error(`node-idempotency server: ${msg}`);
  process.exit(2);
}

const PORT = process.env.PORT;
if (!PORT) fail('PORT is required (PORT=8080 node server.js)');
const STORE = process.env.STORE || 'memory';
if (STORE !== 'memory' && STORE !== 'redis') fail(`STORE must be memory or redis, not ${JSON.stringify(STORE)}`);
if (STORE === 'redis' && !process.env.REDIS_URL) fail('STORE=redis needs REDIS_URL (redis://127.0.0.1:6379)');

const payments = new Map(); // id -> payment
let seq = 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function method(cls, name, decorators) {
  const proto = cls.prototype;
  const desc = Object.getOwnPropertyDescriptor(proto, name);
  Object.defineProperty(proto, name, Reflect.decorate(decorators, proto, name, desc));
}

class HealthController {
  health() { return { status: 'ok' }; }
}
Reflect.decorate([Controller('health')], HealthController);
method(HealthController, 'health', [Get()]);

class PaymentsController {
  count() { return { count: payments.size }; }

  byReference(reference) {
    let n = 0;
    for (const p of payments.values()) if (p.reference === reference) n++;
    return { count: n };
  }

  async create(body) {
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new BadRequestException({ error: 'the body must be a JSON object' });
    }
    if (typeof body.reference !== 'string' || body.reference === '') {
      throw new BadRequestException({ error: 'reference is required' });
    }
    if (typeof body.amount !== 'number' || !(body.amount > 0)) {
      throw new BadRequestException({ error: 'amount must be a positive number' });
    }
    const delay = Math.min(Math.max(Number(body.delay_ms) || 0, 0), 5000);
    if (delay > 0) await sleep(delay);
    seq++;
    const payment = { id: `pay_${seq}`, reference: body.reference, amount: body.amount };
    payments.set(payment.id, payment);
    return payment;
  }
}
Reflect.decorate([Controller('v1/payments')], PaymentsController);
method(PaymentsController, 'count', [Get('count')]);
Query('reference')(PaymentsController.prototype, 'byReference', 0);
method(PaymentsController, 'byReference', [Get()]);
Body()(PaymentsController.prototype, 'create', 0);
// The README's "Decorating selected handlers": @Idempotent() on the one handler, no overrides.
method(PaymentsController, 'create', [Post(), HttpCode(201), Idempotent()]);

class AppModule {}
Reflect.decorate([Module({
  imports: [
    // The README's "Register the module": storage adapter, no other idempotency options.
    NodeIdempotencyModule.forRootAsync({
      storage: STORE === 'redis'
        ? { adapter: StorageAdapterEnum.redis, options: { url: process.env.REDIS_URL } }
        : { adapter: StorageAdapterEnum.memory },
    }),
  ],
  controllers: [HealthController, PaymentsController],
})], AppModule);

const stderrLogger = {
  log: (m) => console.error(m),
  error: (m, t) => console.error(m, t || ''),
  warn: (m) => console.error(m),
  debug: () => {},
  verbose: () => {},
};

async function main() {
  const app = await NestFactory.create(AppModule, { logger: stderrLogger });
  await app.listen(Number(PORT), '127.0.0.1');
  console.error(`node-idempotency server: listening on 127.0.0.1:${PORT} (store ${STORE})`);
  process.on('SIGTERM', () => process.exit(0));
}

main().catch((err) => fail(err && err.stack ? err.stack : String(err)));
