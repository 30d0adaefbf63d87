/**
 * The example application (`npm start`): the tickets flow as a NestJS app on the embedded SQLite
 * store (`data/runs.db`). Try it:
 *
 *   curl -s localhost:3000/orders -H 'content-type: application/json' -d '{"show":"Hamlet","seats":2}'
 *   curl -s localhost:3000/orders
 *
 * `npm run demo` shows a crash inside email_tickets and its recovery by a second worker.
 */
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { EXAMPLE_CONFIG, type ExampleConfig } from './config';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  // SIGTERM/SIGINT close the app: leases stop being renewed and the store is closed cleanly.
  app.enableShutdownHooks();
  const config = app.get<ExampleConfig>(EXAMPLE_CONFIG);
  await app.listen(config.port, '127.0.0.1');
  new Logger('Example').log(
    `worker ${config.workerId} listening on ${await app.getUrl()} (data in ${config.dataDir})`,
  );
}

bootstrap().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
