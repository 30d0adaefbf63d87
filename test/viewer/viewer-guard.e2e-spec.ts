/**
 * The run viewer's access: off unless asked for, behind its guard when one is given, and refused
 * at bootstrap in production without one (unless the app says it is on a private network).
 */
import {
  Injectable,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import request from 'supertest';
import {
  DurableModule,
  DurableSetupError,
  FlowRunner,
} from 'agent-adapter/nest';
import {
  Ledger,
  TicketsFlow,
  TicketsModule,
} from '../nest/fixtures/tickets.fixtures';
import { Apps } from '../nest/utils';

/** Lets a request in with the header `x-operator: yes`. */
@Injectable()
class OperatorGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string> }>();
    return req.headers['x-operator'] === 'yes';
  }
}

describe('run viewer access', () => {
  const apps = new Apps();
  const env = process.env.NODE_ENV;
  afterEach(async () => {
    process.env.NODE_ENV = env;
    await apps.closeAll();
  });

  it('is off unless asked for', async () => {
    const app = await apps.boot([
      DurableModule.forRoot({ store: { type: 'memory' } }),
    ]);
    await request(app.getHttpServer()).get('/runs').expect(404);
    await request(app.getHttpServer()).get('/runs/api/runs').expect(404);
  });

  it('forRootAsync serves the viewer too, behind its guard', async () => {
    const app = await apps.boot([
      DurableModule.forRootAsync({
        useFactory: () => ({ store: { type: 'memory' } }),
        viewer: { path: '/ops/runs', guard: OperatorGuard },
      }),
    ]);
    const server = app.getHttpServer();
    await request(server).get('/ops/runs/api/runs').expect(403);
    await request(server)
      .get('/ops/runs/api/runs')
      .set('x-operator', 'yes')
      .expect(200);
  });

  it('with a guard: a request it refuses gets 403 for the page, the API and every action, and nothing runs', async () => {
    const ledger = new Ledger();
    const app = await apps.boot([
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { path: '/ops/runs', guard: OperatorGuard },
      }),
      TicketsModule.with(ledger),
    ]);
    const { runId } = await app
      .get(FlowRunner)
      .start(TicketsFlow, { show: 'Hamlet', seats: 1 });
    const server = app.getHttpServer();
    for (const path of [
      '/ops/runs',
      '/ops/runs/api/runs',
      `/ops/runs/api/runs/${runId}`,
    ])
      await request(server).get(path).expect(403);
    // The operator's page, with its CSRF token: the viewer's own checks pass, the guard decides.
    const page = await request(server)
      .get('/ops/runs')
      .set('x-operator', 'yes')
      .expect(200);
    const token = /name="agent-adapter-csrf" content="([^"]+)"/.exec(
      page.text,
    )![1]!;
    const cookie = `agent_adapter_csrf=${token}`;
    for (const action of ['approve', 'deny', 'rerun-in-doubt', 'resolve']) {
      const refused = await request(server)
        .post(`/ops/runs/api/runs/${runId}/${action}`)
        .set({ cookie, 'x-agent-adapter-csrf': token })
        .send({})
        .expect(403);
      expect(refused.body.message).toBe('Forbidden resource'); // the guard's answer
    }
    const allowed = await request(server)
      .get('/ops/runs/api/runs')
      .set('x-operator', 'yes')
      .expect(200);
    expect(allowed.body.runs.map((r: { runId: string }) => r.runId)).toEqual([
      runId,
    ]);
    await request(server)
      .get(`/ops/runs/api/runs/${runId}`)
      .set('x-operator', 'yes')
      .expect(200);
    expect(ledger.count('charge_card')).toBe(1);
  });

  it('in production, no guard is a clear error at bootstrap; privateNetwork: true says it is meant', () => {
    process.env.NODE_ENV = 'production';
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { path: '/runs' },
      }),
    ).toThrow(DurableSetupError);
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { path: '/runs' },
      }),
    ).toThrow(/has no guard.*viewer.guard.*privateNetwork/);
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { path: '/runs', privateNetwork: true },
      }),
    ).not.toThrow();
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { guard: OperatorGuard },
      }),
    ).not.toThrow();
  });

  it('refuses a viewer path that is not a URL path', () => {
    expect(() =>
      DurableModule.forRoot({
        store: { type: 'memory' },
        viewer: { path: '/runs?x=<b>' },
      }),
    ).toThrow(/viewer.path/);
  });
});
