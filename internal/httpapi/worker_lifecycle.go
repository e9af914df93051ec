package httpapi

// workerLifecycleRoutes are the routes of the worker lifecycle (OJS worker
// protocol): the heartbeat, and the admin API's worker management (admin
// spec §9) under BasePath+AdminPath.
func (s *Server) workerLifecycleRoutes() []route { return nil }
