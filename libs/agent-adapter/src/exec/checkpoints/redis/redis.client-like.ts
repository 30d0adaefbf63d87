// Its own file, free of ioredis types (as is every public type of the store's options): the store's public typings import it, and must compile for
// users who do not have ioredis installed (redis.client.ts names ioredis's types).
/**
 * An ioredis client (`new Redis(url)` or `new Cluster(nodes)`), typed by the two methods the
 * store needs at construction so these typings do not require ioredis to be installed.
 * @publicApi
 */
export interface RedisClientLike {
  defineCommand(
    name: string,
    definition: { lua: string; numberOfKeys?: number },
  ): void;
  quit(): Promise<unknown>;
}

/**
 * How many replicas must hold each run write before the store resolves it, and how long it waits
 * for them (WAIT numreplicas timeout). Fewer within the timeout: the write is reported as a
 * transient `CheckpointStoreUnavailable` (it is on the master only); the writer then reads the
 * head back, and that read confirms it on the replicas the same way before taking it as stored.
 * @publicApi
 */
export interface RedisReplicaAcks {
  /** Replicas that must acknowledge (>= 1). With several replicas per master, all of them: a
   * failover may promote one that did not acknowledge. */
  count: number;
  /** How long a write waits for them (ms, >= 1; WAIT 0 would wait forever). */
  timeoutMs: number;
}
