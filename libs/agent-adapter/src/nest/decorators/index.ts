export { Flow } from './flow.decorator';
export { Node } from './node.decorator';
export { Tool } from './tool.decorator';
