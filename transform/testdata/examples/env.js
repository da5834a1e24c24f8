addHandler('transform', (request, context) => {
  request.headers['x-api-key'] = process.env.API_KEY;
  return request;
});
