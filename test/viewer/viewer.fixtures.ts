/**
 * What the viewer's browser suites share: the refund flow (a tool that needs an approval), a worker
 * that dies inside a tool, an application with the viewer on a SQLite file, and Chromium.
 */
import { existsSync } from 'node:fs';
import {
  Inject,
  Injectable,
  Module,
  type DynamicModule,
  type INestApplication,
  type ModuleMetadata,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SQLiteCheckpointStore, type CheckpointStore } from 'agent-adapter';
import {
  DurableModule,
  Flow,
  FlowRunner,
  Node,
  RecoveryOrchestrator,
  Tool,
  type DurableViewerOptions,
} from 'agent-adapter/nest';
import { chromium, type Browser } from 'playwright-core';
import { CrashingStore, SimulatedCrash, settle } from 'agent-adapter/testing';
import {
  KEY,
  TicketsFlow,
  TicketsModule,
  type Ledger,
} from '../nest/fixtures/tickets.fixtures';
import { CaptureLogger } from '../nest/utils';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Under CI the browser must be there (.ci/run installs it): a missing one fails, it does not skip. */
export const describeInChromium =
  existsSync(CHROMIUM) || process.env.CI === 'true' ? describe : describe.skip;

export function launchChromium(args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', ...args],
  });
}

const REFUNDS = Symbol('REFUNDS');

@Injectable()
export class Refunds {
  constructor(@Inject(REFUNDS) private readonly done: string[]) {}

  @Tool({ name: 'refund', approval: true })
  async refund(a: { order: string }): Promise<string> {
    this.done.push(a.order);
    return `refunded ${a.order}`;
  }
}

export class RefundState {
  order = '';
  note?: string;
}

@Flow('refund', { state: RefundState })
export class RefundFlow {
  constructor(private readonly refunds: Refunds) {}
  @Node({ start: true, end: true })
  async refund(s: RefundState): Promise<Partial<RefundState>> {
    return { note: await this.refunds.refund({ order: s.order }) };
  }
}

/** The refund flow; every order the tool really refunded goes into `done`. */
@Module({})
export class RefundModule {
  static with(done: string[]): DynamicModule {
    return {
      module: RefundModule,
      providers: [{ provide: REFUNDS, useValue: done }, Refunds, RefundFlow],
    };
  }
}

/**
 * A worker on the SQLite file at `path` that starts the tickets flow as `runId` and dies inside
 * `tool` (its store fails from then on, like a killed process).
 */
export async function crashIn(
  path: string,
  ledger: Ledger,
  tool: string,
  runId: string,
): Promise<void> {
  const inner = new SQLiteCheckpointStore(path);
  const crashing = new CrashingStore(inner);
  ledger.crashIn = { tool, kill: () => crashing.kill(`inside ${tool}`) };
  const moduleRef = await Test.createTestingModule({
    imports: [
      DurableModule.forRoot({
        store: crashing,
        key: KEY,
        workerId: 'viewer-test',
      }),
      TicketsModule.with(ledger),
    ],
  })
    .setLogger(new CaptureLogger())
    .compile();
  const dying = moduleRef.createNestApplication({
    logger: new CaptureLogger(),
  });
  await dying.init();
  await expect(
    dying
      .get(FlowRunner)
      .start(TicketsFlow, { show: 'Hamlet', seats: 2 }, { runId }),
  ).rejects.toThrow(SimulatedCrash);
  await settle();
  await dying.close();
  await inner.close();
}

/**
 * The application with the viewer at `/ops/runs` on the SQLite file at `path` (or on the store
 * given), listening on 127.0.0.1 (a loopback host, allowed by default), its bootstrap recovery done.
 */
export async function viewerApp(
  path: string | CheckpointStore,
  ledger: Ledger,
  refunds: string[],
  options: {
    viewer?: DurableViewerOptions;
    imports?: ModuleMetadata['imports'];
    logger?: CaptureLogger;
  } = {},
): Promise<{ app: INestApplication; url: string }> {
  const logger = options.logger ?? new CaptureLogger();
  const moduleRef = await Test.createTestingModule({
    imports: [
      DurableModule.forRoot({
        store: typeof path === 'string' ? { type: 'sqlite', path } : path,
        key: KEY,
        workerId: 'viewer-test',
        viewer: options.viewer ?? { path: '/ops/runs', privateNetwork: true },
      }),
      TicketsModule.with(ledger),
      RefundModule.with(refunds),
      ...(options.imports ?? []),
    ],
  })
    .setLogger(logger)
    .compile();
  const app = moduleRef.createNestApplication({ logger });
  await app.listen(0, '127.0.0.1');
  await app.get(RecoveryOrchestrator).waitUntilRecovered();
  return { app, url: `${await app.getUrl()}/ops/runs` };
}
