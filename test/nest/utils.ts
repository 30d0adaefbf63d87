import type {
  INestApplication,
  LoggerService,
  ModuleMetadata,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';

/** Keeps what the application logs, so tests can read the recovery lines. */
export class CaptureLogger implements LoggerService {
  readonly lines: Array<{
    level: string;
    message: string;
    context?: string;
    /** The stack an `error` line was given. */
    trace?: string;
  }> = [];

  log(message: unknown, context?: string): void {
    this.add('log', message, context);
  }
  warn(message: unknown, context?: string): void {
    this.add('warn', message, context);
  }
  error(message: unknown, trace?: string, context?: string): void {
    this.add('error', message, context, trace);
  }
  debug(message: unknown, context?: string): void {
    this.add('debug', message, context);
  }
  verbose(message: unknown, context?: string): void {
    this.add('verbose', message, context);
  }

  /** Lines of one context (e.g. 'DurableRecovery'). */
  of(context: string): string[] {
    return this.lines
      .filter((l) => l.context === context)
      .map((l) => `${l.level}: ${l.message}`);
  }

  private add(
    level: string,
    message: unknown,
    context?: string,
    trace?: string,
  ): void {
    this.lines.push({
      level,
      message: String(message),
      ...(context !== undefined && { context }),
      ...(trace !== undefined && { trace }),
    });
  }
}

/** Boots Nest applications and closes every one of them (call `closeAll` in afterEach). */
export class Apps {
  private readonly open: INestApplication[] = [];

  async boot(
    imports: ModuleMetadata['imports'],
    options: {
      providers?: ModuleMetadata['providers'];
      controllers?: ModuleMetadata['controllers'];
      logger?: CaptureLogger;
      /** Runs after the providers exist, before the lifecycle hooks (e.g. to subscribe to events). */
      beforeInit?: (app: INestApplication) => void;
    } = {},
  ): Promise<INestApplication> {
    const logger = options.logger ?? new CaptureLogger();
    const moduleRef = await Test.createTestingModule({
      imports: imports ?? [],
      providers: options.providers ?? [],
      controllers: options.controllers ?? [],
    })
      .setLogger(logger)
      .compile();
    const app = moduleRef.createNestApplication({ logger });
    this.open.push(app);
    options.beforeInit?.(app);
    await app.init();
    return app;
  }

  async closeAll(): Promise<void> {
    while (this.open.length) await this.open.pop()!.close();
  }
}
