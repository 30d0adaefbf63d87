export { Flow } from './flow.decorator';
export { Node } from './node.decorator';
export { Tool } from './tool.decorator';
export { DurableCron } from './durable-cron.decorator';
