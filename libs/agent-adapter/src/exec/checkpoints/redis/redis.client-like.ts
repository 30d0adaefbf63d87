// Its own file, free of ioredis types: the store's public typings import it, and must compile for
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
