addHandler('transform', (request, context) => {
  request.headers['example-header'] = 'Hello World';
  return request;
});
