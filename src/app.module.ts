import { Module } from '@nestjs/common';
import { DurableModule } from 'agent-adapter/nest';
import { EXAMPLE_CONFIG, runsDb, type ExampleConfig } from './config';
import { ExampleConfigModule } from './config.module';
import { OrdersModule } from './orders/orders.module';
import { SupportModule } from './support/support.module';
import { TicketsModule } from './tickets/tickets.module';

/**
 * The example application: the tickets flow behind `POST /orders`, its runs in one SQLite file
 * (every process on this host can share it), every unfinished order recovered at bootstrap.
 */
@Module({
  imports: [
    ExampleConfigModule,
    DurableModule.forRootAsync({
      inject: [EXAMPLE_CONFIG],
      useFactory: (config: ExampleConfig) => ({
        store: { type: 'sqlite', path: runsDb(config) },
        key: config.checkpointKey,
        workerId: config.workerId,
        leaseMs: config.leaseMs,
      }),
      // The run viewer at /runs. This app listens on 127.0.0.1 only; behind a real network, give
      // it a guard (viewer: { guard: AdminGuard }) — production refuses to start without one.
      viewer: { path: '/runs', privateNetwork: true },
    }),
    TicketsModule,
    OrdersModule,
    SupportModule,
  ],
})
export class AppModule {}
