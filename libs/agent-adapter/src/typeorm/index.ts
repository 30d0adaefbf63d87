/**
 * agent-adapter/typeorm: the SQL store's TypeORM entities and migrations. A separate entry so that
 * the typings of 'agent-adapter' never name typeorm: only users of this entry need it installed.
 */
export { agentAdapterEntities } from '../exec/checkpoints/sql/sql.entities';
export type {
  AgentAdapterEntities,
  AgentAdapterEntitiesOptions,
  AgentAdapterRunRow,
  AgentAdapterCheckpointRow,
  AgentAdapterCallRow,
  AgentAdapterStreamRow,
  AgentAdapterMetaRow,
  AgentAdapterQueueRow,
} from '../exec/checkpoints/sql/sql.entities';
export { agentAdapterMigrations } from '../exec/checkpoints/sql/migrations/1795900000000-agent-adapter-init';
export type {
  AgentAdapterMigration,
  MigrationQueryRunner,
} from '../exec/checkpoints/sql/migrations/1795900000000-agent-adapter-init';
export type { SqlTableOptions } from '../exec/checkpoints/sql/sql.schema';
