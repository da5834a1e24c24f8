addHandler('transform', (request, context) => {
  return {
    ...request,
    body: {
      ...request.body,
      processed_at: new Date().toISOString(),
      attempt: context.attempt,
    },
  };
});
