package httpapi

// workerAdminRoutes are the admin API's worker management routes (admin
// spec §9), under BasePath+AdminPath.
func (s *Server) workerAdminRoutes() []route { return nil }
